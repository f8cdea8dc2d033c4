package operator

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// stripManagedFields leaves each kind of object the cache can hold as controller-runtime's
// TransformStripManagedFields does.
func TestStripManagedFieldsAsControllerRuntime(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}}
	meta := func(mf []metav1.ManagedFieldsEntry) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}, ManagedFields: mf}
	}
	unstr := func(mf any) *unstructured.Unstructured {
		md := map[string]any{"name": "a"}
		if mf != nil {
			md["managedFields"] = mf
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}}
	}
	entry := map[string]any{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1"}
	for name, newIn := range map[string]func() any{
		"NodePool":                 func() any { return &karpv1.NodePool{ObjectMeta: meta(fields)} },
		"WorkloadClass":            func() any { return &v1alpha1.WorkloadClass{ObjectMeta: meta(fields)} },
		"ConfigMap without fields": func() any { return &corev1.ConfigMap{ObjectMeta: meta(nil)} },
		"Pod with empty fields":    func() any { return &corev1.Pod{ObjectMeta: meta([]metav1.ManagedFieldsEntry{})} },
		"PartialObjectMetadata":    func() any { return &metav1.PartialObjectMetadata{ObjectMeta: meta(fields)} },
		"unstructured":             func() any { return unstr([]any{entry}) },
		"unstructured, empty list": func() any { return unstr([]any{}) },
		"unstructured, none":       func() any { return unstr(nil) },
		"unstructured, malformed":  func() any { return unstr("not a list") },
		"tombstone": func() any {
			return toolscache.DeletedFinalStateUnknown{Key: "a", Obj: &corev1.Pod{ObjectMeta: meta(fields)}}
		},
		"not an object": func() any { return "a" },
	} {
		want, err := cache.TransformStripManagedFields()(newIn())
		if err != nil {
			t.Fatal(err)
		}
		got, err := stripManagedFields(newIn())
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v; controller-runtime's transform gives %#v", name, got, want)
		}
	}
}
