package v1alpha1_test

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// TestCommitmentFamiliesAreTheCatalogs holds the Baseline CRD's three family rules
// (written by hack/crdfamilies, since a marker cannot name a Go value) to the embedded
// catalog's families: a family the catalog prices must be admitted, and one it does not
// know refused.
func TestCommitmentFamiliesAreTheCatalogs(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, ty := range cat.Types {
		if ty.Family != "" {
			set[ty.Family] = true
		}
	}
	want := slices.Sorted(maps.Keys(set))
	b, err := os.ReadFile("../../config/crd/bases/poolsmith.dev_baselines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	c := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["commitments"]
	sp := c.Properties["savingsPlans"].Items.Schema
	for field, node := range map[string]apiextensionsv1.JSONSchemaProps{
		"savingsPlans[].family":                     sp.Properties["family"],
		"savingsPlans[].discount.families[].family": sp.Properties["discount"].Properties["families"].Items.Schema.Properties["family"],
		"reservedInstances[].instanceType":          c.Properties["reservedInstances"].Items.Schema.Properties["instanceType"],
	} {
		var lists int
		for _, r := range node.XValidations {
			for _, m := range regexp.MustCompile(`\[("[a-z0-9-]+"(,"[a-z0-9-]+")*)\]`).FindAllString(r.Rule, -1) {
				var got []string
				if err := json.Unmarshal([]byte(m), &got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: the rule's families are not the catalog's (%d against %d); run make manifests", field, len(got), len(want))
				}
				lists++
			}
		}
		if lists == 0 {
			t.Errorf("%s: no rule lists the catalog's families; run make manifests", field)
		}
	}
}
