// Command demo is what `make demo` runs: it starts a local cluster (internal/harness/localcluster:
// kube-apiserver, etcd, kube-scheduler and kube-controller-manager built by
// hack/envtest.sh, Karpenter v1.15.0 with its AWS provider on a simulated EC2 account, and
// Poolsmith's manager), applies config/samples/, waits until Karpenter reports every class
// Ready, runs config/samples/workloads/ (the node agents' DaemonSets among them) and prints
// the classes, the NodePools and the nodes Karpenter launched for the pods. DEMO_HOLD=1
// keeps it running; DEMO_LOG_DIR names the directory for the components' logs, created
// when it does not exist (a temporary one otherwise).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/poolsmith/poolsmith/internal/harness/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, os.Stdout, demo.Options{
		SamplesDir:   filepath.Join("config", "samples"),
		WorkloadsDir: filepath.Join("config", "samples", "workloads"),
		Hold:         os.Getenv("DEMO_HOLD") == "1",
		LogDir:       os.Getenv("DEMO_LOG_DIR"),
	}); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}
