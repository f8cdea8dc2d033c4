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

// The headroom Deployment (apps/v1) and PodTemplate (v1) are built-in kinds like the
// admission policies: their full validation lives in k8s.io/kubernetes. In-process they
// are decoded strictly and the rules a rendered placeholder could break are checked
// (names, the selector matching the template, a container, requests within limits); the
// API server judges the rest at write time, and the controller's tests write rendered
// ones to it.

// isBuiltin reports whether gvk is apps/v1 Deployment or v1 PodTemplate.
func isBuiltin(gvk schema.GroupVersionKind) bool {
	return gvk == appsv1.SchemeGroupVersion.WithKind("Deployment") || gvk == corev1.SchemeGroupVersion.WithKind("PodTemplate")
}

// checkBuiltin is Create and Update for a Deployment or a PodTemplate (no transition
// rules are judged).
func checkBuiltin(doc map[string]any) error {
	u := &unstructured.Unstructured{Object: doc}
	gvk := u.GroupVersionKind()
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	strict := func(into any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return apierrors.NewInvalid(gvk.GroupKind(), u.GetName(), field.ErrorList{field.Invalid(field.NewPath(""), field.OmitValueType{}, err.Error())})
		}
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(u.GetName()) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), u.GetName(), msg))
	}
	for _, msg := range validation.IsDNS1123Label(u.GetNamespace()) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), u.GetNamespace(), msg))
	}
	if gvk.Kind == "PodTemplate" {
		pt := &corev1.PodTemplate{}
		if err := strict(pt); err != nil {
			return err
		}
		errs = append(errs, checkPodSpec(field.NewPath("template", "spec"), &pt.Template.Spec)...)
		return invalid(u, errs)
	}
	d := &appsv1.Deployment{}
	if err := strict(d); err != nil {
		return err
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
	errs = append(errs, checkPodSpec(spec.Child("template", "spec"), &d.Spec.Template.Spec)...)
	return invalid(u, errs)
}

// checkPodSpec is what a placeholder's pod spec could break: no container, a request
// above its limit, a GPU or extended resource requested other than as its limit.
func checkPodSpec(pod *field.Path, spec *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(pod.Child("containers"), ""))
	}
	for i, c := range spec.Containers {
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
	return errs
}
