// Command demo is what `make demo` runs: it starts a real kube-apiserver and etcd (built
// by hack/envtest.sh) with Poolsmith's and Karpenter's CRDs, runs the manager in-process,
// applies config/samples/, waits until every class is Synced and prints the classes and
// the NodePools they produced. DEMO_HOLD=1 keeps it running and prints a kubeconfig.
// DEMO_LOG=1 shows the manager's logs.
package main

import (
	"context"
	"fmt"
	"io"
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
		Log:        logWriter(),
	}); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func logWriter() io.Writer {
	if os.Getenv("DEMO_LOG") == "1" {
		return os.Stderr
	}
	return nil
}
