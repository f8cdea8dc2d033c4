// Command crdbounds gives every 32-bit integer of Poolsmith's generated CRDs the bounds of
// its Go type: `make manifests` runs it after controller-gen, before chartgen copies the
// CRDs into the charts.
//
// Why: controller-gen writes `format: int32` for an int32 field but no minimum or maximum,
// and the API server does not enforce the format. An admitted 2147483648 then fails to
// decode in the manager, which lists and watches every object of the kind at once: one
// object would stop the manager from reconciling all the others. Poolsmith's own fields
// could carry +kubebuilder:validation:Maximum markers, but the embedded Karpenter types
// (Baseline.spec.nodeClass, a class's nodeClass) and metav1 types cannot, so the bound is
// set here, in one place, for every field alike. A bound a marker already sets is kept.
// int64 fields need none: the API server refuses integers beyond int64 (they are not JSON
// integers once decoded as float64). Int-or-string fields carry their bound in CEL on the
// field (e.g. spec.rebalance.maxConcurrent). api/v1alpha1's bounds test proves the result
// against the Go types.
package main

import (
	"flag"
	"log"
	"math"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	dir := flag.String("dir", "config/crd/bases", "the directory of generated CRDs")
	flag.Parse()
	files, err := filepath.Glob(filepath.Join(*dir, "*.yaml"))
	if err != nil {
		log.Fatalf("crdbounds: %v", err)
	}
	for _, f := range files {
		if err := bound(f); err != nil {
			log.Fatalf("crdbounds: %s: %v", f, err)
		}
	}
}

func bound(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		if v := crd.Spec.Versions[i].Schema; v != nil && v.OpenAPIV3Schema != nil {
			walk(v.OpenAPIV3Schema)
		}
	}
	var doc map[string]any
	if j, err := yaml.Marshal(crd); err != nil {
		return err
	} else if err := yaml.Unmarshal(j, &doc); err != nil {
		return err
	}
	delete(doc, "status") // controller-gen writes none
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	// controller-gen starts each file with a document separator.
	return os.WriteFile(file, append([]byte("---\n"), out...), 0o644)
}

// walk sets the int32 range on every int32 node under s that lacks a bound.
func walk(s *apiextensionsv1.JSONSchemaProps) {
	if s.Type == "integer" && s.Format == "int32" {
		if s.Minimum == nil {
			s.Minimum = ptr(float64(math.MinInt32))
		}
		if s.Maximum == nil {
			s.Maximum = ptr(float64(math.MaxInt32))
		}
	}
	for k, p := range s.Properties {
		walk(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walk(s.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			walk(&list[i])
		}
	}
}

func ptr[T any](v T) *T { return &v }
