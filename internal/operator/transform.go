package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// stripManagedFields is controller-runtime's cache.TransformStripManagedFields (drop an
// object's managedFields, when it has any, before the cache stores it) reaching the
// metadata through the object's concrete type: that transform calls GetManagedFields and
// SetManagedFields through metav1.Object, which kept both methods of every API type in
// the binary alive (about 195 wrappers each, 96 KB of the binary), nothing else calling
// them. Every object the cache holds is a typed API object (its ObjectMeta reached with
// GetObjectMeta), an unstructured one or a PartialObjectMetadata; anything else, as
// meta.Accessor refuses it there, is passed through untouched.
func stripManagedFields(in any) (any, error) {
	switch obj := in.(type) {
	case *unstructured.Unstructured:
		if obj.GetManagedFields() != nil {
			obj.SetManagedFields(nil)
		}
	case metav1.ObjectMetaAccessor:
		if om, ok := obj.GetObjectMeta().(*metav1.ObjectMeta); ok && om.GetManagedFields() != nil {
			om.SetManagedFields(nil)
		}
	}
	return in, nil
}
