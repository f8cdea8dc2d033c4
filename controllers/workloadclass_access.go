package controllers

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// setAccess reports whether the class's access rule is enforced and which namespaces name
// it their default; a default namespace the rule excludes is an error on the class.
func (r *WorkloadClassReconciler) setAccess(ctx context.Context, wc *v1alpha1.WorkloadClass) error {
	if !r.Capabilities.AccessRules() {
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonAccessDisabled,
			"the manager runs with --access-policies=false: spec.access and namespace defaults are not enforced")
		return nil
	}
	nss := &corev1.NamespaceList{}
	if err := r.List(ctx, nss, client.MatchingLabels{v1alpha1.LabelDefaultClass: wc.Name}); err != nil {
		return fmt.Errorf("listing namespaces whose default class is %s: %w", wc.Name, err)
	}
	var defaults, excluded []string
	for _, ns := range nss.Items {
		defaults = append(defaults, ns.Name)
		if !wc.Spec.Access.Admits(ns.Name, ns.Labels) {
			excluded = append(excluded, ns.Name)
		}
	}
	sort.Strings(defaults)
	sort.Strings(excluded)
	switch {
	case len(excluded) > 0:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonDefaultExcluded,
			fmt.Sprintf("namespaces %s name this class their default (%s) but spec.access excludes them: their pods get no defaults from it", strings.Join(excluded, ", "), v1alpha1.LabelDefaultClass))
	case r.Capabilities.NoDefaultPolicies:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonDefaultsUnavailable,
			"the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: namespace defaults ("+v1alpha1.LabelDefaultClass+") are not applied; access rules are still enforced"+defaultsFor(defaults))
	case wc.Spec.Access == nil:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, "no access rule: any namespace may use the class"+defaultsFor(defaults))
	default:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced,
			fmt.Sprintf("ValidatingAdmissionPolicy %s refuses pods of other namespaces that could run on the class, through AccessRule %s%s", render.AccessPolicyName, wc.Name, defaultsFor(defaults)))
	}
	return nil
}

func defaultsFor(namespaces []string) string {
	if len(namespaces) == 0 {
		return ""
	}
	return "; default class of namespaces " + strings.Join(namespaces, ", ")
}

// enforceBlocked keeps the class's AccessRule following its spec while the NodePool family
// cannot be written (blocked by a conflict, refused, or failed part-way): a security child
// is never held hostage by the family. The rule enforces the intersection of the access
// enforced before and spec.access (a narrowing takes effect now, a widening once the family
// is written), keeps the taints of the family that exists, names every rung the rendered
// and the live rule know, and is recreated if deleted. res is nil when the class does not
// render; the rule is then kept from the live one. It reports whether enforcement lags the
// spec, and sets the Access condition when it does.
func (r *WorkloadClassReconciler) enforceBlocked(ctx context.Context, wc *v1alpha1.WorkloadClass, res *render.Result, reason string) error {
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
	if err := controllerutil.SetControllerReference(wc, want, r.Scheme()); err != nil {
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
	if wc.Spec.Access != nil || len(want.Spec.Access) > 0 {
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonAccessLagging,
			fmt.Sprintf("the NodePool family is not written (%s): AccessRule %s enforces access for %s, with the taints and rungs of the family that exists; a wider spec.access takes effect once the family is written", reason, wc.Name, want.Spec.Allowed))
	}
	return nil
}
