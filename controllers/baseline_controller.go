package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// classesSettle is how long a Baseline's class count must hold before status.classes is
// written: a converge of many classes moves the count at every create, and a write at
// each step was one request more per step (1 to 35 a converge of 200 classes).
const classesSettle = 2 * time.Second

// classesMaxWait bounds how long a count that keeps moving goes unwritten.
const classesMaxWait = 30 * time.Second

// BaselineReconciler reports on each Baseline how many WorkloadClasses use it, and what
// its classes' nodes use of its commitments.
type BaselineReconciler struct {
	client.Client
	// Now is the clock settling is measured by; time.Now when nil.
	Now func() time.Time
	// Signals price the nodes commitments cover, as the classes' weights are priced; the
	// embedded catalog in us-east-1 when nil.
	Signals *signals.Provider

	// counts holds, by Baseline name, the count waiting to settle (a *classCount).
	counts sync.Map
	// commitmentsWritten is when each Baseline's status.commitments was last written.
	commitmentsWritten sync.Map
}

// classCount is a class count not yet written: since when it has held, and since when
// the status has trailed the count.
type classCount struct {
	count        int32
	since, first time.Time
}

// +kubebuilder:rbac:groups=poolsmith.dev,resources=baselines/status,verbs=patch

// Reconcile counts the classes that reference the Baseline. A new Baseline generation is
// recorded at once; a count that moved is written once it has held for classesSettle
// (or has trailed for classesMaxWait), so a converge writes it once, not at every class.
func (r *BaselineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &v1alpha1.Baseline{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			r.counts.Delete(req.Name)
			r.commitmentsWritten.Delete(req.Name)
			forgetBaselineCommitments(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Read only (counted, and their names matched): the cache's own objects, not a copy
	// of every class each time a class is created or deleted.
	classes := &v1alpha1.WorkloadClassList{}
	if err := r.List(ctx, classes, client.MatchingFields{BaselineIndex: b.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing WorkloadClasses of Baseline %s: %w", b.Name, err)
	}
	com, comWait, err := r.commitments(ctx, b, classes.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	count := int32(len(classes.Items))
	countWait, writeCount := time.Duration(0), b.Status.Classes != count || b.Status.ObservedGeneration != b.Generation
	if !writeCount {
		r.counts.Delete(b.Name)
	} else if b.Status.ObservedGeneration == b.Generation {
		if countWait = r.settle(b.Name, count); countWait > 0 {
			writeCount = false
		}
	}
	if !writeCount && com == nil {
		return ctrl.Result{RequeueAfter: sooner(countWait, comWait)}, nil
	}
	patch := client.MergeFrom(b.DeepCopy())
	if writeCount {
		b.Status.Classes, b.Status.ObservedGeneration = count, b.Generation
	}
	if com != nil {
		com.apply(b)
	}
	if err := r.Status().Patch(ctx, b, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("writing status of Baseline %s: %w", b.Name, err)
	}
	if writeCount {
		r.counts.Delete(b.Name)
	}
	if com != nil {
		r.commitmentsWritten.Store(b.Name, r.now())
	}
	return ctrl.Result{RequeueAfter: sooner(countWait, comWait)}, nil
}

// settle records count as the Baseline's current one and returns how much longer it must
// hold before it is written; 0 when it is due.
func (r *BaselineReconciler) settle(name string, count int32) time.Duration {
	now := r.now()
	v, _ := r.counts.LoadOrStore(name, &classCount{count: count, since: now, first: now})
	c := v.(*classCount)
	if c.count != count {
		c.count, c.since = count, now
	}
	// A Baseline's reconciles never run concurrently, so c is not shared while written.
	wait := min(classesSettle-now.Sub(c.since), classesMaxWait-now.Sub(c.first))
	return max(wait, 0)
}

func (r *BaselineReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager recounts a Baseline when it changes or a class is created, deleted or
// re-pointed. Baselines are few, so a class event recounts them all.
func (r *BaselineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("baseline").
		For(&v1alpha1.Baseline{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.WorkloadClass{}, handler.EnqueueRequestsFromMapFunc(r.allBaselines),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Baseline with commitments reports what its classes' nodes use of them.
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(r.baselineOfNodeClaim),
			builder.WithPredicates(predicate.Or[client.Object](createsAndDeletes, launches))).
		// Its commitments take the facts they leave out from the signals ConfigMap's
		// commitments.json (the cache holds only that ConfigMap, see internal/operator).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allBaselines)).
		Complete(r)
}

func (r *BaselineReconciler) allBaselines(ctx context.Context, _ client.Object) []reconcile.Request {
	return listRequests(ctx, r, &v1alpha1.BaselineList{})
}
