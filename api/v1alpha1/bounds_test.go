package v1alpha1_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// TestEveryIntegerIsBoundedByItsGoType walks every Poolsmith CRD schema alongside the Go
// type the manager decodes it into, field by field, and fails on any integer or
// int-or-string the API server could admit beyond what the Go field holds: such a value
// makes the manager's list and watch of the kind fail to decode. int32 fields need a
// minimum and maximum within int32 (hack/crdbounds sets them); int64 and int fields need
// none, since the API server refuses integers beyond int64 (the hostile suite proves it);
// a Quantity decodes any integer; an IntOrString must be refused beyond int32 by the CRD's
// own rules, which the in-process API server code is asked.
func TestEveryIntegerIsBoundedByItsGoType(t *testing.T) {
	types := map[string]reflect.Type{
		"AccessRule":    reflect.TypeFor[v1alpha1.AccessRule](),
		"Baseline":      reflect.TypeFor[v1alpha1.Baseline](),
		"WorkloadClass": reflect.TypeFor[v1alpha1.WorkloadClass](),
	}
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs found: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatal(err)
		}
		goType, ok := types[crd.Spec.Names.Kind]
		if !ok {
			t.Errorf("%s: kind %s has no Go type in this test", f, crd.Spec.Names.Kind)
			continue
		}
		for _, ver := range crd.Spec.Versions {
			w := &boundsWalk{t: t, kind: crd.Spec.Names.Kind}
			root := ver.Schema.OpenAPIV3Schema
			w.walk(root, goType, "")
			if all := countIntegers(root); w.seen != all {
				t.Errorf("%s: the walk matched %d of the schema's %d integer and int-or-string nodes to Go fields", crd.Spec.Names.Kind, w.seen, all)
			}
			for _, path := range w.intOrString {
				probeIntOrString(t, crd.Spec.Names.Kind, path)
			}
		}
	}
}

type boundsWalk struct {
	t           *testing.T
	kind        string
	seen        int
	intOrString []string
}

func (w *boundsWalk) walk(s *apiextensionsv1.JSONSchemaProps, goType reflect.Type, path string) {
	for goType.Kind() == reflect.Pointer {
		goType = goType.Elem()
	}
	switch {
	case goType == reflect.TypeFor[intstr.IntOrString]():
		w.seen++
		if !s.XIntOrString {
			w.t.Errorf("%s %s: an IntOrString whose schema is not int-or-string", w.kind, path)
		}
		w.intOrString = append(w.intOrString, path)
		return
	case goType == reflect.TypeFor[resource.Quantity]():
		// A Quantity parses any integer the API server admits (int64; see
		// TestQuantityDecodesEveryInt64). Some are plain strings in the schema.
		if s.XIntOrString {
			w.seen++
		}
		return
	case s.XIntOrString:
		w.seen++
		w.t.Errorf("%s %s: int-or-string over Go type %s, which this test cannot judge", w.kind, path, goType)
		return
	case s.Type == "integer":
		w.seen++
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		switch goType.Kind() {
		case reflect.Int32:
			lo, hi = math.MinInt32, math.MaxInt32
			if s.Minimum == nil || s.Maximum == nil {
				w.t.Errorf("%s %s: an int32 without minimum and maximum (run make manifests: hack/crdbounds sets them)", w.kind, path)
				return
			}
		case reflect.Int64, reflect.Int:
		default:
			w.t.Errorf("%s %s: an integer over Go kind %s, which this test cannot judge", w.kind, path, goType.Kind())
			return
		}
		if s.Minimum != nil && *s.Minimum < float64(lo) || s.Maximum != nil && *s.Maximum > float64(hi) {
			w.t.Errorf("%s %s: bounds [%v, %v] exceed Go %s", w.kind, path, deref(s.Minimum), deref(s.Maximum), goType.Kind())
		}
		return
	}
	switch goType.Kind() {
	case reflect.Struct:
		fields := jsonFields(goType)
		for name, p := range s.Properties {
			f, ok := fields[name]
			if !ok {
				if countIntegers(&p) > 0 {
					w.t.Errorf("%s %s.%s: no Go field of %s matches", w.kind, path, name, goType)
				}
				continue
			}
			w.walk(&p, f, path+"."+name)
		}
	case reflect.Slice:
		if s.Items != nil && s.Items.Schema != nil {
			w.walk(s.Items.Schema, goType.Elem(), path+"[]")
		}
	case reflect.Map:
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			w.walk(s.AdditionalProperties.Schema, goType.Elem(), path+"[*]")
		}
	}
}

// jsonFields maps JSON names to the field types of a struct, inlined structs included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && ft.Kind() == reflect.Struct && (f.Anonymous || strings.Contains(opts, "inline")) {
			for k, v := range jsonFields(ft) {
				out[k] = v
			}
			continue
		}
		out[name] = f.Type
	}
	return out
}

func countIntegers(s *apiextensionsv1.JSONSchemaProps) int {
	if s.XIntOrString || s.Type == "integer" {
		return 1
	}
	n := 0
	for _, p := range s.Properties {
		n += countIntegers(&p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		n += countIntegers(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		n += countIntegers(s.AdditionalProperties.Schema)
	}
	return n
}

func deref(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}

// probeIntOrString sets the IntOrString at path (through objects only) of the kind's sample
// to one past int32 each way and asks the API server's own validation code: both must be
// refused, naming the field.
func probeIntOrString(t *testing.T, kind, path string) {
	t.Helper()
	v, err := validate.Default()
	if err != nil {
		t.Fatal(err)
	}
	sample := map[string]string{
		"Baseline":      "../../config/samples/poolsmith_v1alpha1_baseline.yaml",
		"WorkloadClass": "../../config/samples/poolsmith_v1alpha1_workloadclass_general.yaml",
	}[kind]
	for _, n := range []int64{math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64} {
		b, err := os.ReadFile(sample)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		keys := strings.Split(strings.TrimPrefix(path, "."), ".")
		m := obj
		for _, k := range keys[:len(keys)-1] {
			if strings.HasSuffix(k, "]") {
				t.Fatalf("%s %s: the probe cannot set a field inside a list", kind, path)
			}
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = n
		// Through JSON as the API server reads a body: integers stay int64.
		j, _ := json.Marshal(obj)
		var body map[string]any
		if err := utiljson.Unmarshal(j, &body); err != nil {
			t.Fatal(err)
		}
		err = v.Create(body)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(path, ".")) {
			t.Errorf("%s %s = %d: want a refusal naming the field, got %v", kind, path, n, err)
		}
	}
}

// TestQuantityDecodesEveryInt64 backs the walk's acceptance of unbounded quantities: any
// integer the API server admits (it refuses those beyond int64) parses.
func TestQuantityDecodesEveryInt64(t *testing.T) {
	for _, s := range []string{"9223372036854775807", "-9223372036854775808", "0"} {
		var q resource.Quantity
		if err := json.Unmarshal([]byte(s), &q); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
