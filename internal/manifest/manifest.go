// Package manifest reads Kubernetes objects from multi-document YAML or JSON: files,
// directories (every .yaml, .yml and .json file in them, sorted) and "-" for stdin. It
// remembers where each object came from so errors can name the file and document.
package manifest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
)

// Object is one document of a manifest.
type Object struct {
	// Source is the file the object came from ("-" for stdin).
	Source string
	// Index is the object's position among the documents of Source, from 1.
	Index int
	// Raw is the document as JSON.
	Raw []byte
	*unstructured.Unstructured
}

// Where says where the object came from, for error messages: file, document and name.
func (o Object) Where() string {
	name := o.GetName()
	if name == "" {
		name = "<no name>"
	}
	return fmt.Sprintf("%s (document %d, %s %s)", o.Source, o.Index, o.GetKind(), name)
}

// Into decodes the object strictly into v: an unknown or duplicate field is an error
// naming its path.
func (o Object) Into(v any) error {
	strict, err := sigsjson.UnmarshalStrict(o.Raw, v)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Where(), err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("%s: %s", o.Where(), strings.Join(msgs, "; "))
	}
	return nil
}

// Load reads every object from paths, in order; directories are read in lexical order.
// stdin is read when a path is "-".
func Load(paths []string, stdin io.Reader) ([]Object, error) {
	var objs []Object
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			got, err := loadFile(f, stdin)
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
		}
	}
	return objs, nil
}

func expand(path string) ([]string, error) {
	if path == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", path, err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

func loadFile(path string, stdin io.Reader) ([]Object, error) {
	var r io.Reader
	if path == "-" {
		if stdin == nil {
			return nil, errors.New("reading -: no standard input")
		}
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		defer f.Close()
		r = f
	}
	return Decode(path, r)
}

// Decode reads every non-empty document of r; source names r in errors.
func Decode(source string, r io.Reader) ([]Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var objs []Object
	for index := 1; ; index++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", source, index, err)
		}
		if len(u.Object) == 0 {
			index--
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", source, index)
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, index, err)
		}
		objs = append(objs, Object{Source: source, Index: index, Raw: raw, Unstructured: u})
	}
}
