package render_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/render"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const goldenDir = "testdata/golden"

// goldenInputs are the four samples and one class per consistency mode, all on the sample
// Baseline, by golden file name.
func goldenInputs(t testing.TB) (map[string]*v1alpha1.WorkloadClass, *v1alpha1.Baseline) {
	t.Helper()
	objs, err := manifest.Load([]string{"../../config/samples", "testdata/modes.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]*v1alpha1.WorkloadClass{}
	var base *v1alpha1.Baseline
	for _, o := range objs {
		switch o.GetKind() {
		case "Baseline":
			base = &v1alpha1.Baseline{}
			if err := o.Into(base); err != nil {
				t.Fatal(err)
			}
		case "WorkloadClass":
			wc := &v1alpha1.WorkloadClass{}
			if err := o.Into(wc); err != nil {
				t.Fatal(err)
			}
			prefix := "sample-"
			if filepath.Base(o.Source) == "modes.yaml" {
				prefix = ""
			}
			classes[prefix+wc.Name] = wc
		}
	}
	if base == nil || len(classes) != 9 {
		t.Fatalf("want the sample Baseline and 9 classes, got %v and %d", base != nil, len(classes))
	}
	return classes, base
}

func renderYAML(t testing.TB, b *v1alpha1.Baseline, wc *v1alpha1.WorkloadClass) []byte {
	t.Helper()
	res, err := render.Render(b, wc, render.Options{})
	if err != nil {
		t.Fatalf("render %s: %v", wc.Name, err)
	}
	docs, err := res.Objects()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		out, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(out)
	}
	return buf.Bytes()
}

// TestGolden compares each render with testdata/golden/<name>.yaml; -update rewrites them.
func TestGolden(t *testing.T) {
	classes, b := goldenInputs(t)
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			got := renderYAML(t, b, classes[name])
			path := filepath.Join(goldenDir, name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/render -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the render; run go test ./internal/render -update and review the diff.\n--- got ---\n%s", path, got)
			}
		})
	}
}
