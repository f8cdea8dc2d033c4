// Package crd embeds Poolsmith's generated CRDs, so the CLI and the controller validate
// Baselines and WorkloadClasses in-process exactly as the API server does.
package crd

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// packed holds packed/*.yaml.gz, the gzip copies hack/crdpack writes of bases/*.yaml
// (the CRDs `make manifests` generates): 43 KB of the binary instead of 226 KB.
//
//go:embed packed/*.yaml.gz
var packed embed.FS

// File is one generated CRD.
type File struct {
	Name string // its file name in bases/, e.g. poolsmith.dev_baselines.yaml
	YAML []byte
}

// Bases returns bases/*.yaml, the CRDs `make manifests` generates, in file name order.
func Bases() ([]File, error) {
	names, err := fs.Glob(packed, "packed/*.yaml.gz")
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(names))
	for _, n := range names {
		gz, err := packed.ReadFile(n)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", n, err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", n, err)
		}
		files = append(files, File{Name: strings.TrimSuffix(strings.TrimPrefix(n, "packed/"), ".gz"), YAML: b})
	}
	return files, nil
}
