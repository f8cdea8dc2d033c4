// Package manifest reads Kubernetes objects from multi-document YAML or JSON: files,
// directories (every .yaml, .yml and .json file in them, sorted) and "-" for stdin. It
// remembers where each object came from so errors can name the file and document.
//
// Input is bounded: only regular files are read (a FIFO or a device such as /dev/zero
// could block or never end), and all the input of one Load together may be at most
// MaxInputBytes.
package manifest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
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
		// A duration's own parser names no field: find the field and say what to write.
		var bad []string
		badDurations(o.Object, reflect.TypeOf(v), "", &bad)
		if len(bad) > 0 {
			return fmt.Errorf("%s: %s", o.Where(), strings.Join(bad, "; "))
		}
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

// MaxInputBytes bounds all the input one Load reads, files and stdin together: 32 MiB,
// some thousand times a large cluster's classes, so a runaway input fails fast instead of
// exhausting memory.
const MaxInputBytes = 32 << 20

// ErrInputTooLarge is returned when the input exceeds MaxInputBytes.
var ErrInputTooLarge = fmt.Errorf("the input is larger than %d MiB, the most Poolsmith reads at once", MaxInputBytes>>20)

var (
	nillableDuration = reflect.TypeOf(karpv1.NillableDuration{})
	metaDuration     = reflect.TypeOf(metav1.Duration{})
)

// badDurations walks the decoded document v along the Go type t and reports, with its
// path, every duration field whose value Go's duration parser refuses.
func badDurations(v any, t reflect.Type, path string, bad *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nillableDuration || t == metaDuration {
		s, ok := v.(string)
		if !ok || (t == nillableDuration && s == karpv1.Never) {
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			never := ""
			if t == nillableDuration {
				never = ", or Never"
			}
			*bad = append(*bad, fmt.Sprintf("%s: %q is not a duration: write whole hours, minutes and seconds such as 30s, 10m or 720h (a day is 24h, a week 168h)%s", path, s, never))
		}
		return
	}
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported() && !f.Anonymous:
			case name == "" && (f.Anonymous || strings.Contains(opts, "inline")):
				badDurations(m, f.Type, path, bad)
			default:
				if name == "" {
					name = f.Name
				}
				if child, ok := m[name]; ok {
					badDurations(child, f.Type, join(name), bad)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		items, _ := v.([]any)
		for i, item := range items {
			badDurations(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), bad)
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			badDurations(m[k], t.Elem(), path+"["+k+"]", bad)
		}
	}
}

// Load reads every object from paths, in order; directories are read in lexical order.
// stdin is read when a path is "-". Paths must be regular files, directories or "-".
func Load(paths []string, stdin io.Reader) ([]Object, error) {
	var objs []Object
	budget := &limitedReader{left: MaxInputBytes}
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			got, err := loadFile(f, stdin, budget)
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
		if err := regular(path, info); err != nil {
			return nil, err
		}
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
			if e.IsDir() {
				continue
			}
			f := filepath.Join(path, e.Name())
			info, err := os.Stat(f) // follows symlinks: a link to a regular file is read
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			if err := regular(f, info); err != nil {
				return nil, fmt.Errorf("directory %s: %w", path, err)
			}
			files = append(files, f)
		}
	}
	sort.Strings(files)
	return files, nil
}

// ReadFile reads one regular file of at most MaxInputBytes, for flags that name a single
// file (--signals, --feed), with the same bounds as Load.
func ReadFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := regular(path, info); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(&limitedReader{r: f, left: MaxInputBytes})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return data, nil
}

// regular refuses what is not a regular file: reading a FIFO blocks until someone
// writes, and a device such as /dev/zero never ends.
func regular(path string, info os.FileInfo) error {
	if info.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is not a regular file (%s): give files, directories or - for stdin", path, info.Mode().Type())
}

func loadFile(path string, stdin io.Reader, budget *limitedReader) ([]Object, error) {
	if path == "-" {
		if stdin == nil {
			return nil, errors.New("reading -: no standard input")
		}
		budget.r = stdin
		return Decode(path, budget)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	// The path was checked before opening; check what was opened too, in case it changed.
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: give files, directories or - for stdin", path)
	}
	budget.r = f
	return Decode(path, budget)
}

// limitedReader reads from r until left bytes are used up, then fails with
// ErrInputTooLarge; one is shared by every file of a Load.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells an input of exactly the limit from a longer one.
		var probe [1]byte
		n, err := l.r.Read(probe[:])
		if n > 0 {
			return 0, ErrInputTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
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
