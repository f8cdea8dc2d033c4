package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// BaselineReconciler reports on each Baseline how many WorkloadClasses use it.
type BaselineReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=poolsmith.dev,resources=baselines/status,verbs=patch

// Reconcile counts the classes that reference the Baseline.
func (r *BaselineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1alpha1.Baseline{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	classes := &v1alpha1.WorkloadClassList{}
	if err := r.List(ctx, classes, client.MatchingFields{BaselineIndex: b.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing WorkloadClasses of Baseline %s: %w", b.Name, err)
	}
	count := int32(len(classes.Items))
	if b.Status.Classes == count && b.Status.ObservedGeneration == b.Generation {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(b.DeepCopy())
	b.Status.Classes, b.Status.ObservedGeneration = count, b.Generation
	if err := r.Status().Patch(ctx, b, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("writing status of Baseline %s: %w", b.Name, err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager recounts a Baseline when it changes or a class is created, deleted or
// re-pointed. Baselines are few, so a class event recounts them all.
func (r *BaselineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("baseline").
		For(&v1alpha1.Baseline{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.WorkloadClass{}, handler.EnqueueRequestsFromMapFunc(r.allBaselines),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

func (r *BaselineReconciler) allBaselines(ctx context.Context, _ client.Object) []reconcile.Request {
	return listRequests(ctx, r, &v1alpha1.BaselineList{})
}
