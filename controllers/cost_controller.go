package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// CostPeriod is how often a class is priced when none of its NodeClaims changes: pods
// are not watched, so the idle part is as old as this at most.
const CostPeriod = 2 * time.Minute

// costMinWrite is the least time between two writes of one class's status.cost, however
// often its NodeClaims change.
const costMinWrite = 15 * time.Second

// CostReconciler prices each WorkloadClass from the NodeClaims it holds and writes
// status.cost (internal/cost decides; this only reads and writes).
type CostReconciler struct {
	// Client reads the cache: classes, their NodePools and NodeClaims, the signals.
	client.Client
	// APIReader lists the pods on the class's nodes and reads the class before a write:
	// status.cost is this controller's memory of the month to date.
	APIReader client.Reader
	Signals   *signals.Provider
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// MinWrite is the least time between two writes of one class's status.cost;
	// costMinWrite when zero (the controller tests shorten it).
	MinWrite time.Duration
	// ClassIndexed says Client's cache has IndexClassLabel registered (the operator
	// does).
	ClassIndexed bool

	// written is when each class's status.cost was last written, by name.
	written sync.Map
}

// +kubebuilder:rbac:groups=poolsmith.dev,resources=workloadclasses,verbs=get
// +kubebuilder:rbac:groups=poolsmith.dev,resources=workloadclasses/status,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// Reconcile prices the class and writes status.cost when a rounded figure changed or the
// month to date is due (cost.Next), at most once per MinWrite.
func (r *CostReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wc := &v1alpha1.WorkloadClass{}
	if err := r.Get(ctx, req.NamespacedName, wc); err != nil {
		if apierrors.IsNotFound(err) {
			forgetCost(req.Name)
			r.written.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wc.DeletionTimestamp.IsZero() || decode.Error(wc) != "" {
		return ctrl.Result{}, nil
	}
	b, err := r.price(ctx, wc)
	if err != nil {
		return ctrl.Result{}, err
	}
	recordCost(wc.Name, b)
	now := r.now()
	if _, write := cost.Next(wc.Status.Cost, b, now); !write {
		return ctrl.Result{RequeueAfter: CostPeriod}, nil
	}
	if last, ok := r.written.Load(wc.Name); ok {
		if wait := r.minWrite() - now.Sub(last.(time.Time)); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	// The cache may not hold this controller's last write yet: accrue from the API
	// server's copy, so no hour is counted twice.
	if err := r.APIReader.Get(ctx, req.NamespacedName, wc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	next, write := cost.Next(wc.Status.Cost, b, now)
	if !write {
		return ctrl.Result{RequeueAfter: CostPeriod}, nil
	}
	orig := wc.DeepCopy()
	wc.Status.Cost = next
	if equality.Semantic.DeepEqual(orig.Status.Cost, next) {
		return ctrl.Result{RequeueAfter: CostPeriod}, nil
	}
	if err := r.Status().Patch(ctx, wc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("writing status.cost of WorkloadClass %s: %w", wc.Name, err))
	}
	r.written.Store(wc.Name, now)
	return ctrl.Result{RequeueAfter: CostPeriod}, nil
}

func (r *CostReconciler) minWrite() time.Duration {
	if r.MinWrite > 0 {
		return r.MinWrite
	}
	return costMinWrite
}

// price gathers the class's NodePools, NodeClaims and pod requests and prices them with
// the catalog the weights use.
func (r *CostReconciler) price(ctx context.Context, wc *v1alpha1.WorkloadClass) (cost.Breakdown, error) {
	cat, _, err := r.Signals.Catalog(ctx, r.Client)
	if err != nil {
		return cost.Breakdown{}, err
	}
	// The coverage the weights see (observe's tracking, without the states).
	src, err := observe.Source{Reader: r.Client, Exports: r.Signals, Options: render.Options{Catalog: cat, Region: r.Signals.Region},
		Tracking: &observe.Tracking{Now: r.now(), LedgerOnly: true}}.Assemble(ctx, wc)
	if err != nil {
		return cost.Breakdown{}, err
	}
	in, err := observe.Cluster{Cached: r.Client, Direct: r.APIReader, Coverage: src.Coverage, ClassIndexed: r.ClassIndexed}.Cost(ctx, wc, cat, r.Signals.Region)
	if err != nil {
		return cost.Breakdown{}, err
	}
	return cost.Compute(in), nil
}

func (r *CostReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// pricedChanges passes what changes a class's price: a NodeClaim created or deleted, and
// one launched (its instance type or capacity type label set), registered (its node) or
// given its allocatable.
var pricedChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*karpv1.NodeClaim), e.ObjectNew.(*karpv1.NodeClaim)
		for _, key := range []string{corev1.LabelInstanceTypeStable, karpv1.CapacityTypeLabelKey, karpv1.NodePoolLabelKey} {
			if o.Labels[key] != n.Labels[key] {
				return true
			}
		}
		return o.Status.NodeName != n.Status.NodeName || !equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// SetupWithManager watches classes (created, or their spec changed) and their NodeClaims.
func (r *CostReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("cost").
		For(&v1alpha1.WorkloadClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(classOfNodeClaim), builder.WithPredicates(pricedChanges)).
		Complete(r)
}
