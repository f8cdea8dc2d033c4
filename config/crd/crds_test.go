package crd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/poolsmith/poolsmith/config/crd"
)

// TestBasesAreTheGeneratedCRDs proves the embedded gzip copies are exactly
// bases/*.yaml, one for each and none besides: `make manifests` regenerates both, and a
// CRD changed without them would validate against the old schema.
func TestBasesAreTheGeneratedCRDs(t *testing.T) {
	files, err := crd.Bases()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob("bases/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(onDisk) || len(files) == 0 {
		t.Fatalf("embedded %d CRDs, bases/ holds %d: run make manifests", len(files), len(onDisk))
	}
	for i, f := range files {
		want, err := os.ReadFile(onDisk[i])
		if err != nil {
			t.Fatal(err)
		}
		if f.Name != filepath.Base(onDisk[i]) || !bytes.Equal(f.YAML, want) {
			t.Errorf("embedded %s is not %s: run make manifests", f.Name, onDisk[i])
		}
	}
}
