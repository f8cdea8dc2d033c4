package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// hostile are inputs admission refuses, each an edit of a valid Baseline and class. The
// API server is asked first, so a row whose input admission accepts fails the test rather
// than proving nothing.
var hostile = []struct {
	name  string
	edit  func(baseline, class map[string]any)
	field string
}{
	{"weight ceiling 1000", func(_, c map[string]any) { spec(c)["weighting"] = map[string]any{"ceiling": int64(1000)} }, "spec.weighting.ceiling"},
	{"taint effect Evict", func(_, c map[string]any) {
		spec(c)["taints"] = []any{map[string]any{"key": "a", "effect": "Evict"}}
	}, "spec.taints[0].effect"},
	{"duplicate taints", func(_, c map[string]any) {
		t := map[string]any{"key": "a", "effect": "NoSchedule"}
		spec(c)["taints"] = []any{t, t}
	}, "spec.taints"},
	{"class name with an underscore", func(_, c map[string]any) { meta(c)["name"] = "General_Class" }, "metadata.name"},
	{"Baseline without spec", func(b, _ map[string]any) { delete(b, "spec") }, "spec"},
	{"budget nodes lots", func(_, c map[string]any) {
		spec(c)["disruption"] = map[string]any{"budgets": []any{map[string]any{"nodes": "lots"}}}
	}, "spec.disruption.budgets[0].nodes"},
	{"Baseline without role or subnets", func(b, _ map[string]any) {
		nc := spec(b)["nodeClass"].(map[string]any)
		delete(nc, "role")
		delete(nc, "subnetSelectorTerms")
	}, "spec.nodeClass"},
}

func spec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }
func meta(obj map[string]any) map[string]any { return obj["metadata"].(map[string]any) }

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOfflineCommandsRefuseWhatAdmissionRefuses(t *testing.T) {
	env, _ := liveCluster(t)
	ctx := context.Background()
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			b := readYAML(t, samples+"/poolsmith_v1alpha1_baseline.yaml")
			c := readYAML(t, samples+"/poolsmith_v1alpha1_workloadclass_general.yaml")
			tc.edit(b, c)
			var refused bool
			for _, obj := range []map[string]any{b, c} {
				u := &unstructured.Unstructured{Object: obj}
				err := env.Client.Create(ctx, u.DeepCopy())
				if err == nil {
					_ = env.Client.Delete(ctx, u)
				}
				refused = refused || err != nil
			}
			if !refused {
				t.Fatal("admission accepts this input; the row proves nothing")
			}
			by, _ := yaml.Marshal(b)
			cy, _ := yaml.Marshal(c)
			stdin := string(by) + "---\n" + string(cy)
			for _, cmd := range []string{"render", "explain", "lint"} {
				code, out, stderr := run(t, stdin, cmd, "-f", "-")
				if code != ExitFindings || (cmd != "lint" && out != "") {
					t.Errorf("%s: exit %d, stdout %q; want exit 1 and nothing", cmd, code, out)
				}
				if !strings.Contains(stderr+out, tc.field) {
					t.Errorf("%s: the error does not name %s:\n%s%s", cmd, tc.field, stderr, out)
				}
			}
		})
	}
}
