// Command crdpack writes config/crd/packed/*.yaml.gz, the gzip copies of
// config/crd/bases/*.yaml that the binary embeds (package config/crd): `make manifests`
// runs it after crdbounds and crdfamilies have finished the CRDs.
//
// Why: the binary validates Baselines, WorkloadClasses and AccessRules in-process against
// their CRDs, and embedded as YAML they were 226 KB of it; gzipped they are 43 KB (issue
// #23). The output has no name or time in its header, so the same CRDs give the same bytes
// and `make verify` can regenerate and compare them.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"log"
	"os"
	"path/filepath"
)

func main() {
	bases := flag.String("bases", "config/crd/bases", "the generated CRDs")
	out := flag.String("out", "config/crd/packed", "where to write their gzip copies")
	flag.Parse()
	if err := run(*bases, *out); err != nil {
		log.Fatalf("crdpack: %v", err)
	}
}

func run(bases, out string) error {
	files, err := filepath.Glob(filepath.Join(bases, "*.yaml"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		packed, err := gzipped(b)
		if err != nil {
			return err
		}
		name := filepath.Base(f) + ".gz"
		want[name] = true
		if err := os.WriteFile(filepath.Join(out, name), packed, 0o644); err != nil {
			return err
		}
	}
	// A CRD no longer generated must not stay embedded.
	stale, err := filepath.Glob(filepath.Join(out, "*.yaml.gz"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if !want[filepath.Base(f)] {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// gzipped is b at gzip's best compression, with an empty header (no name, no time).
func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
