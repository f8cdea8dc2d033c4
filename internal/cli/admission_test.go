package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// The hostile-input suite: each testdata/hostile/*.yaml is one input admission refuses,
// written as JSON merge patches (RFC 7386: null deletes, lists replace) over the samples'
// Baseline (`baseline:`) and general class (`class:`), and a header line
// `# field: <path>` naming the field both admission and the CLI must blame. Add a row by
// adding a file.
const hostileDir = "testdata/hostile"

// hostileInput is one file of the suite, applied to the samples.
type hostileInput struct {
	name, field     string
	baseline, class map[string]any
}

func hostileInputs(t *testing.T) []hostileInput {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(hostileDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no hostile inputs in %s: %v", hostileDir, err)
	}
	var out []hostileInput
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in := hostileInput{name: strings.TrimSuffix(filepath.Base(f), ".yaml")}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "# field:"); ok {
				in.field = strings.TrimSpace(v)
			}
		}
		if in.field == "" {
			t.Fatalf("%s: no `# field:` header", f)
		}
		patches := map[string]any{}
		if err := unmarshalYAML(b, &patches); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		in.baseline = readYAML(t, samples+"/poolsmith_v1alpha1_baseline.yaml")
		in.class = readYAML(t, samples+"/poolsmith_v1alpha1_workloadclass_general.yaml")
		for k := range patches {
			if k != "baseline" && k != "class" {
				t.Fatalf("%s: unknown key %q (baseline or class)", f, k)
			}
		}
		if p, ok := patches["baseline"].(map[string]any); ok {
			mergePatch(in.baseline, p)
		}
		if p, ok := patches["class"].(map[string]any); ok {
			mergePatch(in.class, p)
		}
		out = append(out, in)
	}
	return out
}

// mergePatch applies an RFC 7386 merge patch to doc.
func mergePatch(doc, patch map[string]any) {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			dv, ok := doc[k].(map[string]any)
			if !ok {
				dv = map[string]any{}
				doc[k] = dv
			}
			mergePatch(dv, pv)
		default:
			doc[k] = v
		}
	}
}

// unmarshalYAML reads YAML as the API server reads a body: integers stay int64.
func unmarshalYAML(b []byte, v any) error {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return err
	}
	return utiljson.Unmarshal(j, v)
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := unmarshalYAML(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOfflineCommandsRefuseWhatAdmissionRefuses runs each hostile input on the real API
// server first (a row admission accepts proves nothing and fails), then through render,
// explain and lint, which must refuse it too and name the same field.
func TestOfflineCommandsRefuseWhatAdmissionRefuses(t *testing.T) {
	env, _ := liveCluster(t)
	ctx := context.Background()
	for _, tc := range hostileInputs(t) {
		t.Run(tc.name, func(t *testing.T) {
			var refusals []string
			for _, obj := range []map[string]any{tc.baseline, tc.class} {
				u := &unstructured.Unstructured{Object: obj}
				err := env.Client.Create(ctx, u.DeepCopy())
				if err == nil {
					_ = env.Client.Delete(ctx, u)
					continue
				}
				refusals = append(refusals, err.Error())
			}
			if len(refusals) == 0 {
				t.Fatal("admission accepts this input; the row proves nothing")
			}
			if !strings.Contains(strings.Join(refusals, "\n"), tc.field) {
				t.Errorf("admission does not name %s:\n%s", tc.field, strings.Join(refusals, "\n"))
			}
			by, _ := yaml.Marshal(tc.baseline)
			cy, _ := yaml.Marshal(tc.class)
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

// TestHostileInputsAreWellFormed checks the suite's files without a control plane.
func TestHostileInputsAreWellFormed(t *testing.T) {
	for _, in := range hostileInputs(t) {
		by, err := yaml.Marshal(in.baseline)
		if err != nil || len(by) == 0 {
			t.Errorf("%s: %v", in.name, err)
		}
	}
}
