// Command demo is what `make demo` runs: it starts a real kube-apiserver and etcd (built
// by hack/envtest.sh), installs Poolsmith's and Karpenter's CRDs, applies
// config/samples/, and reports what the API server accepted. DEMO_HOLD=1 keeps the control
// plane running and prints a kubeconfig for kubectl.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/poolsmith/poolsmith/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, os.Stdout, demo.Options{
		SamplesDir: filepath.Join("config", "samples"),
		Hold:       os.Getenv("DEMO_HOLD") == "1",
	}); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}
