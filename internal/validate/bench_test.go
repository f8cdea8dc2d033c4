package validate_test

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/validate"
)

func BenchmarkCreateNodePool(b *testing.B) {
	v, _ := validate.Default()
	doc := loadB(b, nodePool)
	for b.Loop() {
		if err := v.Create(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDefaultedNodePool(b *testing.B) {
	v, _ := validate.Default()
	doc := loadB(b, nodePool)
	for b.Loop() {
		if _, err := v.Defaulted(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func loadB(b *testing.B, doc string) map[string]any {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		b.Fatal(err)
	}
	return m
}
