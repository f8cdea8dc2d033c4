package controllers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// The manager writes no admission policy: the chart installs them once, and the manager
// writes their parameters, the AccessRules.
// +kubebuilder:rbac:groups=poolsmith.dev,resources=accessrules,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// classForNamespace enqueues the class a namespace names its default, so that the class's
// Access condition follows the namespace's label. The cache holds only labelled namespaces:
// a namespace whose label is removed leaves it, and that delete event carries the old label.
func classForNamespace(_ context.Context, obj client.Object) []reconcile.Request {
	if class := obj.GetLabels()[v1alpha1.LabelDefaultClass]; class != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: class}}}
	}
	return nil
}

// access reads what the Access condition reports (see accessCondition): whether the
// manager enforces access rules and serves namespace defaults, and which namespaces name
// the class their default.
func (r *WorkloadClassReconciler) access(ctx context.Context, wc *v1alpha1.WorkloadClass) (*access, error) {
	a := &access{Disabled: !r.Capabilities.AccessRules(), NoDefaults: r.Capabilities.NoDefaultPolicies}
	if a.Disabled {
		return a, nil
	}
	nss := &corev1.NamespaceList{}
	if err := r.List(ctx, nss, client.MatchingLabels{v1alpha1.LabelDefaultClass: wc.Name}); err != nil {
		return nil, fmt.Errorf("listing namespaces whose default class is %s: %w", wc.Name, err)
	}
	a.Defaults = nss.Items
	return a, nil
}

// enforceBlocked keeps the class's AccessRule following its spec while the NodePool family
// cannot be written (blocked by a conflict, refused, or failed part-way): a security child
// is never held hostage by the family. The rule enforces the intersection of the access
// enforced before and spec.access (a narrowing takes effect now, a widening once the family
// is written), keeps the taints of the family that exists, names every rung the rendered
// and the live rule know, and is recreated if deleted. res is nil when the class does not
// render; the rule is then kept from the live one. It records the rule kept in o, whose
// Access condition then says that enforcement lags the spec.
func (r *WorkloadClassReconciler) enforceBlocked(ctx context.Context, wc *v1alpha1.WorkloadClass, res *render.Result, o *outcome) error {
	if !r.Capabilities.AccessRules() {
		return nil
	}
	live := &v1alpha1.AccessRule{}
	switch err := r.Get(ctx, client.ObjectKey{Name: wc.Name}, live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return fmt.Errorf("getting AccessRule %s: %w", wc.Name, err)
	case !metav1.IsControlledBy(live, wc):
		// Another owner's object holds the name: the plan reports it as a conflict.
		return nil
	}
	want := render.NarrowedAccessRule(wc, res.AccessRule(), live)
	if want == nil {
		return nil
	}
	if err := setControllerReference(wc, want, r.Scheme()); err != nil {
		return err
	}
	switch {
	case live == nil:
		if err := r.Create(ctx, want, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("restoring AccessRule %s: %w", wc.Name, err)
		}
	case !equality.Semantic.DeepEqual(live.Spec, want.Spec) || !maps.Equal(live.Labels, want.Labels):
		want.ResourceVersion = live.ResourceVersion
		want.Finalizers = live.Finalizers
		if err := r.Update(ctx, want, client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("narrowing AccessRule %s: %w", wc.Name, err)
		}
	}
	o.Access = &access{Kept: want}
	return nil
}

// setControllerReference is controllerutil.SetControllerReference for a class and its
// AccessRule, setting the owner reference through the rule's concrete type: that function
// sets it with SetOwnerReferences called through metav1.Object, which, with orphan's call,
// kept that method of every API type in the binary alive (about 195 wrappers), nothing
// else calling it. Same checks, same reference, same errors.
func setControllerReference(owner *v1alpha1.WorkloadClass, controlled *v1alpha1.AccessRule, scheme *runtime.Scheme) error {
	if ns := owner.Namespace; ns != "" {
		if controlled.Namespace == "" {
			return fmt.Errorf("cluster-scoped resource must not have a namespace-scoped owner, owner's namespace %s", ns)
		}
		if ns != controlled.Namespace {
			return fmt.Errorf("cross-namespace owner references are disallowed, owner's namespace %s, obj's namespace %s", ns, controlled.Namespace)
		}
	}
	gvk, err := apiutil.GVKForObject(owner, scheme)
	if err != nil {
		return err
	}
	ref := metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               owner.Name,
		UID:                owner.UID,
		BlockOwnerDeletion: ptr.To(true),
		Controller:         ptr.To(true),
	}
	if existing := metav1.GetControllerOf(controlled); existing != nil && !sameOwner(*existing, ref) {
		return &controllerutil.AlreadyOwnedError{Object: controlled, Owner: *existing}
	}
	for i := range controlled.OwnerReferences {
		if sameOwner(controlled.OwnerReferences[i], ref) {
			controlled.OwnerReferences[i] = ref
			return nil
		}
	}
	controlled.OwnerReferences = append(controlled.OwnerReferences, ref)
	return nil
}

// sameOwner is controllerutil's referSameObject: the same group, kind and name.
func sameOwner(a, b metav1.OwnerReference) bool {
	aGV, err := schema.ParseGroupVersion(a.APIVersion)
	if err != nil {
		return false
	}
	bGV, err := schema.ParseGroupVersion(b.APIVersion)
	if err != nil {
		return false
	}
	return aGV.Group == bGV.Group && a.Kind == b.Kind && a.Name == b.Name
}
