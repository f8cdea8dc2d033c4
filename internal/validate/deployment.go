package validate

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The headroom Deployment (apps/v1) is a built-in kind like the admission policies: its
// full validation lives in k8s.io/kubernetes. In-process it is decoded strictly and the
// rules a rendered placeholder Deployment could break are checked (names, the selector
// matching the template, a container, requests within limits); the API server judges the
// rest at write time, and the controller's tests write rendered ones to it.

// isDeployment reports whether gvk is apps/v1 Deployment.
func isDeployment(gvk schema.GroupVersionKind) bool {
	return gvk == appsv1.SchemeGroupVersion.WithKind("Deployment")
}

// checkDeployment is Create and Update for a Deployment (no transition rules are judged).
func checkDeployment(doc map[string]any) error {
	u := &unstructured.Unstructured{Object: doc}
	gvk := u.GroupVersionKind()
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(d); err != nil {
		return apierrors.NewInvalid(gvk.GroupKind(), u.GetName(), field.ErrorList{field.Invalid(field.NewPath(""), field.OmitValueType{}, err.Error())})
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(d.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), d.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(d.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), d.Namespace, msg))
	}
	spec := field.NewPath("spec")
	if d.Spec.Replicas != nil && *d.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *d.Spec.Replicas, "must be greater than or equal to 0"))
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	switch {
	case d.Spec.Selector == nil || err != nil || sel.Empty():
		errs = append(errs, field.Invalid(spec.Child("selector"), d.Spec.Selector, "a non-empty selector is required"))
	case !sel.Matches(labels.Set(d.Spec.Template.Labels)):
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), d.Spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	pod := spec.Child("template", "spec")
	if len(d.Spec.Template.Spec.Containers) == 0 {
		errs = append(errs, field.Required(pod.Child("containers"), ""))
	}
	for i, c := range d.Spec.Template.Spec.Containers {
		path := pod.Child("containers").Index(i).Child("resources")
		for name, req := range c.Resources.Requests {
			if limit, ok := c.Resources.Limits[name]; ok && req.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
				if limit, ok := c.Resources.Limits[name]; !ok || req.Cmp(limit) != 0 {
					errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(), "must be equal to "+string(name)+" limit"))
				}
			}
		}
	}
	return invalid(u, errs)
}
