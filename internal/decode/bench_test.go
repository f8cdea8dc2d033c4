package decode

import (
	"encoding/json"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// sampleClass is the GPU sample class as the API server sends it.
func sampleClass(b *testing.B) []byte {
	y, err := os.ReadFile("../../config/samples/poolsmith_v1alpha1_workloadclass_gpu.yaml")
	if err != nil {
		b.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// BenchmarkTypedDecode is what controller-runtime's typed informer spends per item.
func BenchmarkTypedDecode(b *testing.B) {
	data := sampleClass(b)
	for b.Loop() {
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v1alpha1.WorkloadClass{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLenientDecode is what this package's informer spends per item: the dynamic
// client's decode into a map, then Unstructured.
func BenchmarkLenientDecode(b *testing.B) {
	data := sampleClass(b)
	for b.Loop() {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(data, &u.Object); err != nil {
			b.Fatal(err)
		}
		if err := Unstructured(u, &v1alpha1.WorkloadClass{}); err != nil {
			b.Fatal(err)
		}
	}
}
