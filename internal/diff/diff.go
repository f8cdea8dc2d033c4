// Package diff compares a rendered object with its live copy: which fields Poolsmith sets
// differ, and whether applying the change makes Karpenter replace nodes. The controller
// uses it to skip applies that would change nothing; `poolsmith diff` prints it.
package diff

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Change is one field whose live value differs from the rendered one.
type Change struct {
	// Path is dotted, with list items by index.
	Path string
	// Live is the live value as JSON, or "" when the field is absent.
	Live string
	// Want is the rendered value as JSON, or "" when the field is to be removed.
	Want string
}

func (c Change) String() string {
	if c.Want == "" {
		return fmt.Sprintf("%s: %s -> (removed)", c.Path, c.Live)
	}
	if c.Live == "" {
		return fmt.Sprintf("%s: (unset) -> %s", c.Path, c.Want)
	}
	return fmt.Sprintf("%s: %s -> %s", c.Path, c.Live, c.Want)
}

// Changes lists the fields of want that live lacks or holds with another value. Fields
// only live has (set by Karpenter, another field manager or defaulting) are not changes:
// server-side apply leaves them alone too. Lists are compared item by item and must have
// the same length, as Karpenter's lists are atomic. apiVersion and kind say which object
// it is, not what it holds, and typed reads often leave them empty: they are skipped.
func Changes(want, live map[string]any) []Change {
	var out []Change
	content := map[string]any{}
	for k, v := range want {
		if k != "apiVersion" && k != "kind" {
			content[k] = v
		}
	}
	compare("", content, live, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Removed lists the fields live holds under the same path that want lacks: written by
// someone else (a hand edit, another field manager) into an object Poolsmith owns whole.
// want should carry the CRD's defaults, or every defaulted field would count. Lists of
// different lengths are Changes, not removals; items of equal-length lists are compared.
func Removed(want, live map[string]any) []Change {
	var out []Change
	removed("", want, live, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func removed(path string, want, live any, out *[]Change) {
	switch l := live.(type) {
	case map[string]any:
		w, ok := want.(map[string]any)
		if !ok {
			return
		}
		for k, lv := range l {
			wv, present := w[k]
			if !present {
				*out = append(*out, Change{Path: join(path, k), Live: jsonString(lv)})
				continue
			}
			removed(join(path, k), wv, lv, out)
		}
	case []any:
		w, ok := want.([]any)
		if !ok || len(w) != len(l) {
			return
		}
		for i := range l {
			removed(fmt.Sprintf("%s[%d]", path, i), w[i], l[i], out)
		}
	}
}

func compare(path string, want, live any, out *[]Change) {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			*out = append(*out, change(path, want, live))
			return
		}
		for k, wv := range w {
			lv, present := l[k]
			if !present {
				*out = append(*out, change(join(path, k), wv, nil))
				continue
			}
			compare(join(path, k), wv, lv, out)
		}
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			*out = append(*out, change(path, want, live))
			return
		}
		for i := range w {
			compare(fmt.Sprintf("%s[%d]", path, i), w[i], l[i], out)
		}
	default:
		if !reflect.DeepEqual(want, live) {
			*out = append(*out, change(path, want, live))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func change(path string, want, live any) Change {
	c := Change{Path: path, Want: jsonString(want)}
	if live != nil {
		c.Live = jsonString(live)
	}
	return c
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Drift says whether applying want over live makes Karpenter replace live's nodes.
type Drift string

const (
	// NoDrift: Karpenter's hash of the object is unchanged.
	NoDrift Drift = ""
	// WillDrift: Karpenter's hash changes, so every node launched from the object drifts.
	WillDrift Drift = "will drift"
	// MayDrift: AMI, subnet or security-group selectors change; nodes drift only if what
	// the selectors resolve to changes, which only the cluster knows.
	MayDrift Drift = "may drift"
)

// NodePoolDrift compares Karpenter's own NodePool hashes (requirements are not hashed:
// only nodes that no longer match them drift, which Karpenter decides per node).
func NodePoolDrift(want, live *karpv1.NodePool) Drift {
	if want.Hash() != live.Hash() {
		return WillDrift
	}
	return NoDrift
}

// NodeClassDrift compares Karpenter's own EC2NodeClass hashes, then the selectors the
// hash ignores.
func NodeClassDrift(want, live *awsv1.EC2NodeClass) Drift {
	if want.Hash(nil) != live.Hash(nil) {
		return WillDrift
	}
	if !reflect.DeepEqual(want.Spec.AMISelectorTerms, live.Spec.AMISelectorTerms) ||
		!reflect.DeepEqual(want.Spec.SubnetSelectorTerms, live.Spec.SubnetSelectorTerms) ||
		!reflect.DeepEqual(want.Spec.SecurityGroupSelectorTerms, live.Spec.SecurityGroupSelectorTerms) {
		return MayDrift
	}
	return NoDrift
}
