package decode

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
)

// AnnotationError is set, in the manager's memory only, on a WorkloadClass or Baseline
// whose stored form does not decode whole: it says which fields did not and why. The
// object then holds its metadata and the spec fields that decoded, so it must never be
// written back whole (an update would drop the fields that did not decode). A value set by
// hand is dropped when the object decodes.
const AnnotationError = "poolsmith.dev/decode-error"

// Error is why obj's stored form did not decode whole, or "" when it did.
func Error(obj metav1.Object) string {
	return obj.GetAnnotations()[AnnotationError]
}

// Failed reports whether the top-level spec field (its JSON name) is among those that did
// not decode.
func Failed(obj metav1.Object, field string) bool {
	for _, p := range strings.Split(Error(obj), "; ") {
		if strings.HasPrefix(p, "spec."+field+": ") || strings.HasPrefix(p, "spec: ") {
			return true
		}
	}
	return false
}

// unmarshal decodes as the API machinery's JSON serializer does: field names are case
// sensitive.
func unmarshal(data []byte, v any) error {
	return kjson.UnmarshalCaseSensitivePreserveInts(data, v)
}

// Into decodes one object's JSON into obj, a pointer to a struct with TypeMeta,
// ObjectMeta, Spec and Status (a WorkloadClass or a Baseline). When it does not decode
// whole, obj holds the metadata, each top-level spec field that decodes on its own and the
// status if it decodes, and AnnotationError names the rest; an error is returned only when
// not even the metadata decodes.
func Into(data []byte, obj client.Object) error {
	v := reflect.ValueOf(obj).Elem()
	v.SetZero()
	err := unmarshal(data, obj)
	if err == nil {
		if _, ok := obj.GetAnnotations()[AnnotationError]; ok {
			a := maps.Clone(obj.GetAnnotations())
			delete(a, AnnotationError)
			objectMeta(v).SetAnnotations(a)
		}
		return nil
	}
	v.SetZero()
	var parts struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            json.RawMessage   `json:"spec"`
		Status          json.RawMessage   `json:"status"`
	}
	if perr := unmarshal(data, &parts); perr != nil {
		return fmt.Errorf("decoding %s: %w", parts.Kind, err)
	}
	v.FieldByName("TypeMeta").Set(reflect.ValueOf(parts.TypeMeta))
	v.FieldByName("ObjectMeta").Set(reflect.ValueOf(parts.Metadata))
	var problems []string
	if len(parts.Spec) > 0 {
		problems = decodeSpec(parts.Spec, v.FieldByName("Spec"))
	}
	if len(parts.Status) > 0 {
		status := reflect.New(v.FieldByName("Status").Type())
		if serr := unmarshal(parts.Status, status.Interface()); serr != nil {
			problems = append(problems, "status: "+serr.Error())
		} else {
			v.FieldByName("Status").Set(status.Elem())
		}
	}
	if len(problems) == 0 {
		problems = []string{err.Error()}
	}
	a := maps.Clone(obj.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationError] = strings.Join(problems, "; ")
	objectMeta(v).SetAnnotations(a)
	return nil
}

// objectMeta is the ObjectMeta of the struct v (obj's, in Into). Annotations are set
// through it rather than through client.Object: SetAnnotations called through the
// interface kept that method of every API type in the binary alive (about 195 wrappers,
// 83 KB of the binary), nothing else calling it.
func objectMeta(v reflect.Value) *metav1.ObjectMeta {
	return v.FieldByName("ObjectMeta").Addr().Interface().(*metav1.ObjectMeta)
}

// decodeSpec decodes each top-level field of raw into spec on its own, and returns
// "spec.<field>: <error>" for each that does not decode.
func decodeSpec(raw json.RawMessage, spec reflect.Value) []string {
	var fields map[string]json.RawMessage
	if err := unmarshal(raw, &fields); err != nil {
		return []string{"spec: " + err.Error()}
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		one, _ := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		// A field that fails may be half set: decode it alone first, then into spec.
		if err := unmarshal(one, reflect.New(spec.Type()).Interface()); err != nil {
			problems = append(problems, fmt.Sprintf("spec.%s: %v", k, err))
			continue
		}
		_ = unmarshal(one, spec.Addr().Interface())
	}
	return problems
}

// Unstructured decodes u into obj as Into does.
func Unstructured(u *unstructured.Unstructured, obj client.Object) error {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return Into(data, obj)
}
