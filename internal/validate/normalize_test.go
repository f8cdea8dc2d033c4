package validate_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// render.CleanJSON (what the renderer writes and compares) and validate.Normalize (what
// the validator judges) are two forms of one document: CleanJSON is Normalize without
// status, creationTimestamp and nulls. If they parted (one decoding numbers as float64,
// say), a rendered object and its live copy would compare unequal, or the validator would
// judge another document than the one written.
func TestCleanJSONIsNormalizeWithoutStatusAndNulls(t *testing.T) {
	var baseline *v1alpha1.Baseline
	var classes []*v1alpha1.WorkloadClass
	files, _ := filepath.Glob("../../config/samples/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(string(b), "kind: Baseline"):
			baseline = &v1alpha1.Baseline{}
			err = yaml.UnmarshalStrict(b, baseline)
		default:
			wc := &v1alpha1.WorkloadClass{}
			err = yaml.UnmarshalStrict(b, wc)
			classes = append(classes, wc)
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if baseline == nil || len(classes) == 0 {
		t.Fatal("no samples")
	}
	compared := 0
	for _, wc := range classes {
		res, err := render.Render(baseline, wc, render.Options{})
		if err != nil {
			t.Fatalf("%s: %v", wc.Name, err)
		}
		objs := []any{res.NodeClass}
		for _, np := range res.NodePools {
			objs = append(objs, np)
		}
		for _, p := range res.Policies {
			objs = append(objs, p)
		}
		for _, obj := range objs {
			clean, err := render.CleanJSON(obj)
			if err != nil {
				t.Fatal(err)
			}
			normal, err := validate.Normalize(obj)
			if err != nil {
				t.Fatal(err)
			}
			delete(normal, "status")
			if md, ok := normal["metadata"].(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
			dropNulls(normal)
			if !reflect.DeepEqual(clean, normal) {
				t.Errorf("%T of class %s: CleanJSON\n%v\nNormalize without status and nulls\n%v", obj, wc.Name, clean, normal)
			}
			compared++
		}
	}
	t.Logf("%d rendered objects compared", compared)
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if child == nil {
				delete(t, k)
				continue
			}
			dropNulls(child)
		}
	case []any:
		for _, child := range t {
			dropNulls(child)
		}
	}
}
