package v1alpha1_test

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// TestHeadroomCeilingsAreTheCatalogsLargest holds the CEL ceilings on
// spec.headroom.podShape (cpu, memory, gpu; written as constants because admission cannot
// read the catalog) to the largest instance type the embedded catalog knows, so a unit no
// type could host is refused, and a type added to the catalog cannot make them too low.
func TestHeadroomCeilingsAreTheCatalogsLargest(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	var vcpu, gpus int
	var mem int64
	for _, ty := range cat.Types {
		vcpu, gpus, mem = max(vcpu, ty.VCPU), max(gpus, ty.GPUs), max(mem, ty.MemoryMiB)
	}
	if got := resource.MustParse(v1alpha1.HeadroomMaxCPU); got.Value() != int64(vcpu) {
		t.Errorf("HeadroomMaxCPU %s, the catalog's largest type has %d vCPUs", v1alpha1.HeadroomMaxCPU, vcpu)
	}
	// The largest memory, rounded up to a whole TiB.
	if got := resource.MustParse(v1alpha1.HeadroomMaxMemory); got.Value() != (mem+(1<<20)-1)/(1<<20)*(1<<40) {
		t.Errorf("HeadroomMaxMemory %s, the catalog's largest type has %d MiB", v1alpha1.HeadroomMaxMemory, mem)
	}
	if v1alpha1.HeadroomMaxGPU != gpus {
		t.Errorf("HeadroomMaxGPU %d, the catalog's largest type has %d GPUs", v1alpha1.HeadroomMaxGPU, gpus)
	}
	// The CRD's rules carry the same figures (markers cannot name a Go constant).
	b, err := os.ReadFile("../../config/crd/bases/poolsmith.dev_workloadclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	shape := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["headroom"].Properties["podShape"]
	rules := func(field string) string {
		var out []string
		for _, r := range shape.Properties[field].XValidations {
			out = append(out, r.Rule)
		}
		return strings.Join(out, "\n")
	}
	for field, want := range map[string]string{"cpu": v1alpha1.HeadroomMaxCPU, "memory": v1alpha1.HeadroomMaxMemory} {
		if !strings.Contains(rules(field), "compareTo(quantity('"+want+"')) <= 0") {
			t.Errorf("the CRD's rules on podShape.%s do not bound it by %s: %s", field, want, rules(field))
		}
	}
	if m := shape.Properties["gpu"].Maximum; m == nil || *m != float64(v1alpha1.HeadroomMaxGPU) {
		t.Errorf("the CRD's podShape.gpu maximum is %v, want %d", m, v1alpha1.HeadroomMaxGPU)
	}
}
