package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Origin says which layer set a field.
type Origin string

// Origins of rendered fields.
const (
	OriginKarpenterDefault Origin = "karpenter-default"
	// OriginPoolsmithDefault is Poolsmith's own default for a setting Karpenter does not
	// have (spec.rebalance, spec.access).
	OriginPoolsmithDefault Origin = "poolsmith-default"
	OriginBaseline         Origin = "baseline"
	OriginClass            Origin = "class"
)

// OriginProfile is the origin of a value a profile set.
func OriginProfile(name string) Origin { return Origin("profile:" + name) }

// OriginComputed is the origin of a value Poolsmith derived; what says from what.
func OriginComputed(what string) Origin { return Origin("computed:" + what) }

// Field is one leaf of a rendered object and where its value came from.
type Field struct {
	// Object is KIND/NAME.
	Object string `json:"object"`
	// Path is JSONPath-like: map entries and list items by key, e.g.
	// spec.template.spec.requirements[kubernetes.io/arch].
	Path   string `json:"path"`
	Value  string `json:"value"`
	Origin Origin `json:"origin"`
}

// Provenance lists every field of every rendered object with its origin, objects in
// output order and fields in path order.
type Provenance []Field

// origins records, while an object is built, which layer set which path. A path's origin
// is that of its longest recorded prefix.
type origins map[string]Origin

func (o origins) set(path string, origin Origin) { o[path] = origin }

func (o origins) lookup(path string) Origin {
	for p := path; p != ""; p = parent(p) {
		if origin, ok := o[p]; ok {
			return origin
		}
	}
	if origin, ok := o[""]; ok { // an object-wide origin
		return origin
	}
	return OriginComputed("unknown")
}

// parent drops the last segment of a path: "a.b[c].d" -> "a.b[c]" -> "a.b" -> "a" -> "".
func parent(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

// mapFields are object fields whose keys are data, shown as [key] rather than .key.
var mapFields = map[string]bool{
	"labels": true, "annotations": true, "tags": true, "limits": true,
	"evictionHard": true, "evictionSoft": true, "evictionSoftGracePeriod": true,
	"kubeReserved": true, "systemReserved": true,
}

// listKey names a list item by its identity where it has one, otherwise by index.
func listKey(field string, item any, index int) string {
	m, ok := item.(map[string]any)
	if ok {
		switch field {
		case "requirements":
			return fmt.Sprint(m["key"])
		case "taints", "startupTaints":
			return fmt.Sprintf("%v:%v", m["key"], m["effect"])
		case "blockDeviceMappings":
			if d, ok := m["deviceName"]; ok {
				return fmt.Sprint(d)
			}
		}
	}
	return fmt.Sprint(index)
}

// trace flattens an object (as JSON) into fields, each with the origin recorded for it.
func trace(object string, doc map[string]any, o origins) []Field {
	var fields []Field
	var walk func(path, field string, v any)
	walk = func(path, field string, v any) {
		switch t := v.(type) {
		case map[string]any:
			if field == "requirements-item" {
				fields = append(fields, Field{Object: object, Path: path, Value: requirementString(t), Origin: o.lookup(path)})
				return
			}
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				child := path + "." + k
				if path == "" {
					child = k
				}
				if mapFields[field] {
					child = path + "[" + k + "]"
				}
				walk(child, k, t[k])
			}
		case []any:
			if scalars(t) {
				fields = append(fields, Field{Object: object, Path: path, Value: scalarList(t), Origin: o.lookup(path)})
				return
			}
			keys := make([]string, len(t))
			for i, item := range t {
				keys[i] = listKey(field, item, i)
			}
			itemField := ""
			if field == "requirements" {
				itemField = "requirements-item"
				keys = disambiguate(keys, t)
			}
			for i, item := range t {
				walk(fmt.Sprintf("%s[%s]", path, keys[i]), itemField, item)
			}
		default:
			fields = append(fields, Field{Object: object, Path: path, Value: scalarString(t), Origin: o.lookup(path)})
		}
	}
	walk("", "", doc)
	return fields
}

// disambiguate names requirements whose key appears more than once (Gt and Lt bounds)
// key,operator, as requirementKeys does when origins are recorded.
func disambiguate(keys []string, items []any) []string {
	count := map[string]int{}
	for _, k := range keys {
		count[k]++
	}
	for i, k := range keys {
		if m, ok := items[i].(map[string]any); ok && count[k] > 1 {
			keys[i] = fmt.Sprintf("%s,%v", k, m["operator"])
		}
	}
	return keys
}

func scalars(list []any) bool {
	for _, v := range list {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

func scalarList(list []any) string {
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i] = scalarString(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "null"
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

func requirementString(m map[string]any) string {
	s := fmt.Sprint(m["operator"])
	if vals, ok := m["values"].([]any); ok {
		s += " " + scalarList(vals)
	}
	if mv, ok := m["minValues"]; ok {
		s += fmt.Sprintf(" (minValues %v)", mv)
	}
	return s
}
