//go:build e2e

package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/poolsmith/poolsmith/internal/harness/demo"
)

// TestDemo is `make demo` as a smoke test: every sample class must be Ready by
// Karpenter, every sample pod must run on a node Karpenter launched on the expected rung.
// It starts Karpenter, so it runs with the end-to-end suite (`make e2e`).
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	err := demo.Run(context.Background(), &out, demo.Options{
		SamplesDir: "../../../config/samples", WorkloadsDir: "../../../config/samples/workloads", Timeout: 3 * time.Minute,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, want := range []string{"All classes Ready", "Every pod Running", "3 DaemonSets run a pod on each of the", "WORKLOADCLASS", "NODEPOOL", "Nodes Karpenter launched",
		"pod ml/trainer selecting the class: admitted",
		"pod web/trainer selecting the class: refused",
		"Pod trainer in namespace web could run on WorkloadClass gpu-ml",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	classes, rungs := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && (f[0] == "general" || f[0] == "ci" || f[0] == "gpu" || f[0] == "analytics") && !strings.HasPrefix(f[1], f[0]+"-"):
			classes[f[0]] = f[1] == "True" && f[2] == "True" && f[3] == "AllReady"
		case len(f) >= 9 && strings.HasPrefix(f[1], f[0]+"-"):
			rungs[f[1]] = true
		}
	}
	for _, c := range []string{"general", "ci", "gpu", "analytics"} {
		if !classes[c] {
			t.Errorf("class %s is not Synced=True Ready=True AllReady", c)
		}
	}
	// The sample workloads: inflate and web on general's top rung, the runners on ci's,
	// the training job on gpu's (on-demand first, g6 before g5).
	for _, r := range []string{"general-spot-arm64", "ci-spot-arm64", "gpu-on-demand-amd64-g6"} {
		if !rungs[r] {
			t.Errorf("no node launched on rung %s", r)
		}
	}
}
