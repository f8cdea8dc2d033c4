package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
)

// TestHeadroomObjectsAreTheChart: the local cluster installs the headroom namespace and
// PriorityClass as the chart does with headroom.enabled, so the end-to-end scenarios prove
// the placeholders under what a user installs: every field the harness sets is the
// chart's (the chart adds its own labels). $HELM (make test sets it) or bin/helm renders it.
func TestHeadroomObjectsAreTheChart(t *testing.T) {
	root, err := testenv.ModuleDir("")
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(root, "bin", "helm")
	}
	home := t.TempDir()
	cmd := exec.Command(bin, "template", "poolsmith", "charts/poolsmith", "--namespace", "poolsmith-system",
		"--set", "headroom.enabled=true", "--show-only", "templates/headroom.yaml")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template (run `make helm`, or set HELM): %v: %s", err, stderr.String())
	}
	docs, err := manifest.Decode("templates/headroom.yaml", bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range HeadroomObjects() {
		ours, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		var chart map[string]any
		for _, d := range docs {
			if d.GetName() == obj.GetName() && strings.HasSuffix(reflect.TypeOf(obj).Elem().Name(), d.GetKind()) {
				chart = d.Object
			}
		}
		if chart == nil {
			t.Errorf("the chart renders no %T %s", obj, obj.GetName())
			continue
		}
		for _, diff := range notIn(ours, chart, "") {
			t.Errorf("%T %s: %s", obj, obj.GetName(), diff)
		}
	}
}

// notIn lists the leaves of ours that the chart's document does not hold with the same
// value (empty maps and the zero creationTimestamp aside).
func notIn(ours, chart any, path string) []string {
	switch o := ours.(type) {
	case map[string]any:
		c, _ := chart.(map[string]any)
		var out []string
		for k, v := range o {
			if k == "creationTimestamp" {
				continue
			}
			out = append(out, notIn(v, c[k], path+"."+k)...)
		}
		return out
	default:
		if reflect.DeepEqual(normalize(ours), normalize(chart)) || (ours == false && chart == nil) {
			return nil
		}
		return []string{path + ": the harness sets " + toString(ours) + ", the chart " + toString(chart)}
	}
}

// normalize makes numbers comparable across the converter (int64) and YAML (int64 or float64).
func normalize(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case int32:
		return float64(n)
	}
	return v
}

func toString(v any) string {
	if v == nil {
		return "nothing"
	}
	return fmt.Sprint(v)
}
