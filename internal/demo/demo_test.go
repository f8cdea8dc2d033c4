package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/poolsmith/poolsmith/internal/demo"
)

// TestDemo is `make demo` as a smoke test: the samples must all sync and the tables print.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	err := demo.Run(context.Background(), &out, demo.Options{SamplesDir: "../../config/samples", Timeout: time.Minute})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"All classes Synced",
		"WORKLOADCLASS", "NODEPOOL",
		"gpu-on-demand-amd64-g6", "ci-spot-amd64", "general-spot-arm64", "analytics-on-demand-amd64",
		"pod ml/trainer selecting the class: admitted",
		"pod web/trainer selecting the class: refused",
		"Pod trainer in namespace web could run on WorkloadClass gpu-ml",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && (fields[0] == "general" || fields[0] == "gpu") && fields[1] != "True" {
			t.Errorf("class not Synced: %q", line)
		}
	}
}
