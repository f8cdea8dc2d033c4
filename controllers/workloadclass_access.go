package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings;mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=get;list;watch;create;update;delete
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
	if r.NoAccessPolicies {
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
	case r.NoDefaultPolicies:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionFalse, v1alpha1.ReasonDefaultsUnavailable,
			"the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: namespace defaults ("+v1alpha1.LabelDefaultClass+") are not applied; access rules are still enforced"+defaultsFor(defaults))
	case wc.Spec.Access == nil:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, "no access rule: any namespace may use the class"+defaultsFor(defaults))
	default:
		setCondition(wc, v1alpha1.ConditionAccess, metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced,
			fmt.Sprintf("ValidatingAdmissionPolicy %s refuses pods of other namespaces that could run on the class%s", render.AccessPolicyName(wc.Name), defaultsFor(defaults)))
	}
	return nil
}

func defaultsFor(namespaces []string) string {
	if len(namespaces) == 0 {
		return ""
	}
	return "; default class of namespaces " + strings.Join(namespaces, ", ")
}
