package chart_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// hostileSpec is testdata/hostile-values.yaml.
type hostileSpec struct {
	Base     map[string]any  `json:"base"`
	Payloads []string        `json:"payloads"`
	Targets  []hostileTarget `json:"targets"`
}

// hostileTarget is where a payload goes: the value at Path, or with Key the map key at Path.
type hostileTarget struct {
	Path   []any          `json:"path"`
	Key    bool           `json:"key"`
	With   map[string]any `json:"with"`
	Benign string         `json:"benign"`
}

func (tg hostileTarget) String() string {
	s := pointer(tg.Path)
	if tg.Key {
		s += " (as a key)"
	}
	if tg.With != nil {
		w, _ := json.Marshal(tg.With)
		s += " with " + string(w)
	}
	return s
}

// named says whether helm's error names the target: the schema's JSON pointer of the value
// (of its map, for a key), or the chart's own messages' a.b[0].c.
func (tg hostileTarget) named(msg string) bool {
	if tg.Key {
		return strings.Contains(msg, "'"+pointer(tg.Path[:len(tg.Path)-1])+"': additional properties")
	}
	return strings.Contains(msg, "'"+pointer(tg.Path)+"'") || strings.Contains(msg, dotted(tg.Path)+" ")
}

// hostileNamespace is where the hostile renders are dry-run.
const hostileNamespace = "hostile"

// TestHostileValuesCannotInject renders the chart with a YAML-injecting payload in every
// string value (testdata/hostile-values.yaml). Helm must refuse each one with a message
// naming the value, or render exactly the documents, keys and value types it renders
// without it, with the restricted securityContexts unchanged and every object accepted by
// the API server. Without the schema (--skip-schema-validation) the templates alone must
// hold: refuse a name naming it, or render the same keys and types.
//
// A payload goes into every target of a group at once (the schema names every value it
// refuses); only what one render cannot judge is rendered again, target by target.
func TestHostileValuesCannotInject(t *testing.T) {
	// Its renders run beside the RBAC sweep, which mostly waits on its managers: it starts
	// no manager and writes nothing but dry runs, so neither sees the other.
	t.Parallel()
	var spec hostileSpec
	if err := yaml.UnmarshalStrict([]byte(mustRead(t, "test/chart/testdata/hostile-values.yaml")), &spec); err != nil {
		t.Fatal(err)
	}
	merged := map[string]any{}
	for _, f := range []string{"charts/poolsmith/values.yaml", "test/chart/testdata/custom-values.yaml"} {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(mustRead(t, f)), &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		mergeValues(merged, v)
	}
	mergeValues(merged, spec.Base)

	// Every string value is a target, so a new value cannot go untested (a list's first
	// item stands for the others).
	firstItem := func(path []any) string {
		p := slices.Clone(path)
		for i := range p {
			if _, ok := p[i].(float64); ok {
				p[i] = float64(0)
			}
		}
		return pointer(p)
	}
	targeted := map[string]bool{}
	for _, tg := range spec.Targets {
		targeted[firstItem(tg.Path)] = true
	}
	for _, p := range stringLeaves(merged, nil) {
		if !targeted[firstItem(p)] {
			t.Errorf("the string value %s has no target in testdata/hostile-values.yaml", pointer(p))
		}
	}

	installServiceMonitorCRD(t)
	for _, ns := range []string{hostileNamespace, "karpenter"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// Targets are grouped by their `with` and by value or key (a key and its value cannot
	// both be replaced in one render); each group has its reference render.
	type group struct {
		with      map[string]any
		base      map[string]any
		reference []map[string]any
		targets   []hostileTarget
		benign    map[string]string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, tg := range spec.Targets {
		w, _ := json.Marshal(tg.With)
		k := string(w) + strconv.FormatBool(tg.Key)
		g := byKey[k]
		if g == nil {
			g = &group{with: tg.With, base: deepCopy(merged), benign: map[string]string{}}
			mergeValues(g.base, deepCopy(tg.With))
			out, err := helm(t, "template", "poolsmith", "charts/poolsmith", "--namespace", hostileNamespace, "--values", writeValues(t, g.base))
			if err != nil {
				t.Fatalf("the reference render with %s: %v", w, err)
			}
			if g.reference, err = parseDocs(out); err != nil {
				t.Fatalf("the reference render with %s: %v", w, err)
			}
			byKey[k] = g
			groups = append(groups, g)
		}
		benign := tg.Benign
		if tg.Key {
			benign = fmt.Sprint(tg.Path[len(tg.Path)-1])
		} else if v, ok := lookup(g.base, tg.Path); ok && fmt.Sprint(v) != "" {
			benign = fmt.Sprint(v)
		}
		if benign == "" {
			t.Fatalf("%s has no value to build payloads from: give it a benign", tg)
		}
		g.targets = append(g.targets, tg)
		g.benign[tg.String()] = benign
	}

	for i, p := range spec.Payloads {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			for _, g := range groups {
				for _, skipSchema := range []bool{false, true} {
					// judge renders the payload in every target of ts and reports each
					// target that injected or was refused without being named.
					var judge func(ts []hostileTarget)
					judge = func(ts []hostileTarget) {
						values := deepCopy(g.base)
						alias := map[string]string{}
						for _, tg := range ts {
							payload := strings.ReplaceAll(p, "<v>", g.benign[tg.String()])
							if err := place(values, tg.Path, tg.Key, payload); err != nil {
								t.Fatal(err)
							}
							if tg.Key {
								alias[g.benign[tg.String()]], alias[payload] = "<key>", "<key>"
							}
						}
						args := []string{"template", "poolsmith", "charts/poolsmith", "--namespace", hostileNamespace, "--values", writeValues(t, values)}
						how := ""
						if skipSchema {
							args, how = append(args, "--skip-schema-validation"), " without the schema"
						}
						out, err := helm(t, args...)
						var problems []string
						if err != nil {
							var rest []hostileTarget
							for _, tg := range ts {
								if !tg.named(err.Error()) {
									rest = append(rest, tg)
								}
							}
							switch {
							case len(rest) == len(ts) && len(ts) == 1:
								problems = []string{fmt.Sprintf("helm failed without naming the value (so it reached a template and broke it): %v", err)}
							case len(rest) == len(ts):
								for _, tg := range ts {
									judge([]hostileTarget{tg})
								}
								return
							case len(rest) > 0:
								judge(rest)
								return
							default:
								return
							}
						} else {
							docs, err := parseDocs(out)
							if err != nil {
								problems = []string{fmt.Sprintf("the render does not parse (the value broke the YAML): %v", err)}
							} else {
								problems = compareRenders(g.reference, docs, alias)
							}
							if len(problems) == 0 && !skipSchema {
								// The schema let it through: the API server must take every object.
								for _, d := range docs {
									o := &unstructured.Unstructured{Object: d}
									// A namespace that does not exist is a valid value all the same.
									if err := env.Client.Patch(ctx, o, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership, client.DryRunAll); err != nil && !apierrors.IsNotFound(err) {
										problems = append(problems, fmt.Sprintf("the schema accepts it but the API server refuses %s %s: %v", o.GetKind(), o.GetName(), err))
									}
								}
							}
						}
						if len(problems) == 0 {
							return
						}
						if len(ts) > 1 {
							for _, tg := range ts {
								judge([]hostileTarget{tg})
							}
							return
						}
						payload := strings.ReplaceAll(p, "<v>", g.benign[ts[0].String()])
						t.Errorf("%s = %q%s:\n  %s", ts[0], payload, how, strings.Join(problems, "\n  "))
					}
					judge(g.targets)
				}
			}
		})
	}
}

// compareRenders lists how got differs from want: documents, every key path with the type
// of its value, and the pod and container securityContexts. alias renames map keys first.
func compareRenders(want, got []map[string]any, alias map[string]string) []string {
	var bad []string
	if len(got) != len(want) {
		bad = append(bad, fmt.Sprintf("%d documents rendered, want %d", len(got), len(want)))
	}
	for i := range min(len(got), len(want)) {
		w, g := shape(want[i], "", alias, map[string]string{}), shape(got[i], "", alias, map[string]string{})
		where := fmt.Sprintf("document %d (%s %s)", i+1, want[i]["kind"], nameOf(want[i]))
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s: new key %s (%s)", where, k, g[k]))
			} else if w[k] != g[k] {
				bad = append(bad, fmt.Sprintf("%s: %s is a %s, want a %s", where, k, g[k], w[k]))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if _, ok := g[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s: key %s is gone", where, k))
			}
		}
		for _, path := range [][]string{{"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}} {
			wp, _, _ := unstructured.NestedMap(want[i], path...)
			gp, _, _ := unstructured.NestedMap(got[i], path...)
			if wp == nil {
				continue
			}
			if !reflect.DeepEqual(wp["securityContext"], gp["securityContext"]) {
				bad = append(bad, fmt.Sprintf("%s: the pod securityContext is %v, want %v", where, gp["securityContext"], wp["securityContext"]))
			}
			for _, list := range []string{"initContainers", "containers"} {
				wc, _ := wp[list].([]any)
				gc, _ := gp[list].([]any)
				if len(wc) != len(gc) {
					bad = append(bad, fmt.Sprintf("%s: %d %s, want %d", where, len(gc), list, len(wc)))
					continue
				}
				for j := range wc {
					ws, gs := wc[j].(map[string]any)["securityContext"], gc[j].(map[string]any)["securityContext"]
					if !reflect.DeepEqual(ws, gs) {
						bad = append(bad, fmt.Sprintf("%s: %s[%d].securityContext is %v, want %v", where, list, j, gs, ws))
					}
				}
			}
		}
	}
	return bad
}

// shape maps every key path of v to the type of its value.
func shape(v any, path string, alias map[string]string, out map[string]string) map[string]string {
	switch v := v.(type) {
	case map[string]any:
		out[path] = "map"
		for k, x := range v {
			if a, ok := alias[k]; ok {
				k = a
			}
			shape(x, path+"/"+strings.ReplaceAll(k, "/", "~1"), alias, out)
		}
	case []any:
		out[path] = "list"
		for i, x := range v {
			shape(x, path+"/"+strconv.Itoa(i), alias, out)
		}
	case nil:
		out[path] = "null"
	default:
		out[path] = reflect.TypeOf(v).Kind().String()
	}
	return out
}

func nameOf(doc map[string]any) string {
	name, _, _ := unstructured.NestedString(doc, "metadata", "name")
	return name
}

// parseDocs parses helm template's output strictly (a duplicate key is an error), without
// its empty documents.
func parseDocs(out string) ([]map[string]any, error) {
	var docs []map[string]any
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for i := 1; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, raw)
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(j, &doc); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, raw)
		}
		docs = append(docs, doc)
	}
}

func pointer(path []any) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(fmt.Sprint(p), "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func dotted(path []any) string {
	var b strings.Builder
	for _, p := range path {
		if n, ok := p.(float64); ok {
			fmt.Fprintf(&b, "[%d]", int(n))
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}

// stringLeaves lists the path of every string in v.
func stringLeaves(v any, path []any) [][]any {
	switch v := v.(type) {
	case map[string]any:
		var out [][]any
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, stringLeaves(v[k], append(slices.Clip(path), k))...)
		}
		return out
	case []any:
		var out [][]any
		for i, x := range v {
			out = append(out, stringLeaves(x, append(slices.Clip(path), float64(i)))...)
		}
		return out
	case string:
		return [][]any{path}
	}
	return nil
}

// mergeValues merges src into dst as helm merges values files: maps key by key, anything
// else replaced.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func lookup(v any, path []any) (any, bool) {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[fmt.Sprint(p)]; !ok {
				return nil, false
			}
		case []any:
			i, ok := p.(float64)
			if !ok || int(i) >= len(c) {
				return nil, false
			}
			v = c[int(i)]
		default:
			return nil, false
		}
	}
	return v, true
}

// place puts payload at path in values, or, with key, renames the map key at path to it.
func place(values map[string]any, path []any, key bool, payload string) error {
	parent, ok := lookup(values, path[:len(path)-1])
	if !ok {
		return fmt.Errorf("%s: no such value", pointer(path[:len(path)-1]))
	}
	last := path[len(path)-1]
	switch c := parent.(type) {
	case map[string]any:
		k := fmt.Sprint(last)
		if key {
			v, ok := c[k]
			if !ok {
				return fmt.Errorf("%s: no such key", pointer(path))
			}
			delete(c, k)
			c[payload] = v
			return nil
		}
		c[k] = payload
	case []any:
		i, ok := last.(float64)
		if !ok || int(i) >= len(c) || key {
			return fmt.Errorf("%s: not a list item", pointer(path))
		}
		c[int(i)] = payload
	default:
		return fmt.Errorf("%s: not a map or a list", pointer(path[:len(path)-1]))
	}
	return nil
}

// writeValues writes values as a JSON values file, which any string survives intact.
func writeValues(t *testing.T, values map[string]any) string {
	t.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
