package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// FieldManager is the field owner recorded on every create and update of a child (the
// writes are updates at the live resourceVersion, not server-side apply).
const FieldManager = "poolsmith"

// BaselineIndex indexes WorkloadClasses by the name of the Baseline they use.
const BaselineIndex = observe.BaselineIndex

// conflictRequeue is how soon a class blocked by a foreign object looks again: objects
// Poolsmith does not own carry no label its cache selects, so no event announces their
// removal.
const conflictRequeue = time.Minute

// conflictRetry is how soon a pass that lost a write race (409 Conflict) plans again.
const conflictRetry = time.Second

// deletionRequeue bounds the wait for children that Karpenter's finalizers hold.
const deletionRequeue = 10 * time.Second

// WorkloadClassReconciler keeps each WorkloadClass's EC2NodeClass and NodePool ladder in
// sync with its render.
type WorkloadClassReconciler struct {
	client.Client
	// APIReader reads past the cache, which holds only labelled children, to find objects
	// that would collide with a child before it is created.
	APIReader               client.Reader
	Recorder                events.EventRecorder
	MaxConcurrentReconciles int
	// Signals supplies the region and spot signals cost strategies price with.
	Signals *signals.Provider
	// Validator judges every write before the first one; nil means the CRDs'.
	Validator plan.Validator
	// Capabilities are what the cluster serves and the operator enables (NodeOverlays,
	// AccessRules, namespace defaults), built once by the operator.
	Capabilities capabilities.Capabilities
	// Usage reads the live requests a percentage-sized headroom is of; nil reads none.
	Usage *observe.Usage
	// ClassIndexed says Client's cache has IndexClassLabel registered (the operator
	// does): a class's NodePools and NodeClaims are then listed by that index.
	ClassIndexed bool
	// CommitmentOpenDwell is how long two nodes of room must hold before an Exhausted
	// commitment is Open again for a class (--commitment-open-dwell); 0: 5 minutes.
	CommitmentOpenDwell time.Duration

	// taken holds the UIDs of classes whose last pass met a name held by another object.
	taken sync.Map
	// written holds, by class UID, the class as this manager's last write of it returned it
	// (a *writtenClass), so a pass that reads an older copy from the cache starts from its
	// own write: it neither writes the same status twice nor conflicts on the finalizer.
	written sync.Map
	// memo spares re-comparing children that matched the same render before.
	memo plan.Memo
	// budgetOver is, by class name, whether the last BudgetExceeded announced was True.
	budgetOver sync.Map
	// seen holds, by class name, the Baseline generation its last applied pass rendered
	// from (a baselineSeen), which tells a Baseline edit's fan-out from other passes.
	seen sync.Map
	// fanOut gathers a Baseline edit's child updates into one event on the Baseline.
	fanOut fanOutEvents
	// ownWrites holds, by KIND/NAME, the resourceVersion the API server gave this manager's
	// last create or update of a child, so that the watch event of that very write does not
	// plan the class again (see notOwnWrite).
	ownWrites sync.Map
}

// ownWrite is this manager's last write of a child: the resourceVersion the API server
// gave it and, for a create, when it was made.
type ownWrite struct {
	resourceVersion string
	created         time.Time
}

// cacheLagBound is how long a child this manager created may stay missing from the cache
// before a pass plans it again as missing (see awaitingCache).
const cacheLagBound = 15 * time.Second

// cacheLagRetry is how soon a pass that found its own creates missing from the cache
// plans again.
const cacheLagRetry = 500 * time.Millisecond

// notOwnWrite drops a child's create or update event when the child is exactly what this
// manager's last write of it made (the resourceVersion the write returned): the pass that
// wrote it already planned against that render, and planning again would render, compare
// and find nothing to do, once for every write (a Baseline edit reaching 200 classes
// planned 400 times). Any other write to the child (a hand edit, Karpenter's status) has
// another resourceVersion and plans the class as before. A deletion always plans the
// class, and forgets the write (forgetDeleted).
func (r *WorkloadClassReconciler) notOwnWrite() predicate.Funcs {
	own := func(obj client.Object) bool {
		key := plan.KindOf(obj) + "/" + obj.GetName()
		v, ok := r.ownWrites.Load(key)
		if !ok || v.(ownWrite).resourceVersion != obj.GetResourceVersion() {
			return false
		}
		r.ownWrites.CompareAndDelete(key, v)
		return true
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !own(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !own(e.ObjectNew) },
		DeleteFunc: r.forgetDeleted().DeleteFunc,
	}
}

// forgetDeleted forgets this manager's last write of a child once the child is deleted,
// so that awaitingCache never mistakes a deleted child for one the cache has yet to see.
func (r *WorkloadClassReconciler) forgetDeleted() predicate.Funcs {
	return predicate.Funcs{DeleteFunc: func(e event.DeleteEvent) bool {
		r.ownWrites.Delete(plan.KindOf(e.Object) + "/" + e.Object.GetName())
		return true
	}}
}

// awaitingCache names a child the plan would create although this manager created it
// less than cacheLagBound ago and has seen no deletion of it since: the cache has not
// caught up with the write yet (a pass started by another event, under load). Creating it
// again would only meet AlreadyExists and read it back, two requests for nothing.
func (r *WorkloadClassReconciler) awaitingCache(p *plan.Plan) string {
	for _, s := range p.Steps {
		if s.Action != plan.Create {
			continue
		}
		if v, ok := r.ownWrites.Load(s.Ref()); ok && !v.(ownWrite).created.IsZero() && time.Since(v.(ownWrite).created) < cacheLagBound {
			return s.Ref()
		}
	}
	return ""
}

// writtenClass is a class as the API server returned it after this manager wrote it, and
// the resourceVersions that write and the ones before it superseded.
type writtenClass struct {
	obj        *v1alpha1.WorkloadClass
	superseded map[string]bool
}

// remember records wc as the API server returned it from a write made over version from.
func (r *WorkloadClassReconciler) remember(wc *v1alpha1.WorkloadClass, from string) {
	superseded := map[string]bool{from: true}
	if prev, ok := r.written.Load(wc.UID); ok {
		for rv := range prev.(*writtenClass).superseded {
			superseded[rv] = true
		}
	}
	r.written.Store(wc.UID, &writtenClass{obj: wc.DeepCopy(), superseded: superseded})
}

// ownWrite replaces a cached class older than this manager's last write of it with that
// write, and forgets the write once the cache holds it or something newer.
func (r *WorkloadClassReconciler) ownWrite(wc *v1alpha1.WorkloadClass) *v1alpha1.WorkloadClass {
	v, ok := r.written.Load(wc.UID)
	if !ok {
		return wc
	}
	w := v.(*writtenClass)
	if w.superseded[wc.ResourceVersion] {
		return w.obj.DeepCopy()
	}
	r.written.CompareAndDelete(wc.UID, v)
	return wc
}

// +kubebuilder:rbac:groups=poolsmith.dev,resources=workloadclasses,verbs=list;watch;update
// +kubebuilder:rbac:groups=poolsmith.dev,resources=workloadclasses/status,verbs=patch
// +kubebuilder:rbac:groups=poolsmith.dev,resources=workloadclasses/finalizers,verbs=update
// +kubebuilder:rbac:groups=poolsmith.dev,resources=baselines,verbs=list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=list;watch
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeoverlays,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile gets the class, handles deletion, resolves the Baseline, renders, applies,
// prunes and writes status once.
func (r *WorkloadClassReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wc := &v1alpha1.WorkloadClass{}
	if err := r.Get(ctx, req.NamespacedName, wc); err != nil {
		if apierrors.IsNotFound(err) {
			forgetClass(req.Name)
			r.memo.Forget(req.Name)
			r.budgetOver.Delete(req.Name)
			r.seen.Delete(req.Name)
			r.written.Range(func(uid, w any) bool {
				if w.(*writtenClass).obj.Name == req.Name {
					r.written.Delete(uid)
				}
				return true
			})
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if why := decode.Error(wc); why != "" {
		return r.undecodable(ctx, wc, why)
	}
	if !wc.DeletionTimestamp.IsZero() {
		r.written.Delete(wc.UID)
		return r.finalize(ctx, wc)
	}
	wc = r.ownWrite(wc)
	if addFinalizer(wc, v1alpha1.Finalizer) {
		from := wc.ResourceVersion
		if err := r.Update(ctx, wc); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
		r.remember(wc, from)
	}

	original := wc.DeepCopy()
	o, result, err := r.sync(ctx, wc)
	r.report(wc, o, err)
	countError(wc, err)
	if serr := r.writeStatus(ctx, original, wc); serr != nil {
		return ctrl.Result{}, errors.Join(err, serr)
	}
	return result, err
}

// sync renders the class, plans its children, validates every write and carries the
// plan out, and returns what it found and did for setStatus. It never changes children
// when the Baseline is missing, the spec is invalid, a write would be refused or a
// foreign object holds a rendered name: a class is written whole or not at all.
func (r *WorkloadClassReconciler) sync(ctx context.Context, wc *v1alpha1.WorkloadClass) (outcome, ctrl.Result, error) {
	var o outcome
	in, err := r.source().Assemble(ctx, wc)
	if err != nil {
		return o, ctrl.Result{}, err
	}
	name := wc.BaselineName()
	if in.Baseline == nil {
		o.fail(v1alpha1.ReasonBaselineNotFound, fmt.Sprintf("Baseline %q does not exist; existing children are left as they are until it does", name))
		// the Baseline watch brings the class back when it appears
		return o, ctrl.Result{}, r.enforceBlocked(ctx, wc, nil, &o)
	}
	if why := decode.Error(in.Baseline); why != "" {
		msg := fmt.Sprintf("Baseline %q does not decode (%s); existing children are left as they are until it is fixed", name, why)
		o.fail(v1alpha1.ReasonInvalidSpec, msg)
		return o, ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
	}
	in.Inputs.Options.Headroom.Now = r.Signals.Clock()
	cl := r.cluster(wc)
	cl.Coverage = in.Coverage
	out, err := cl.Plan(ctx, in.Inputs)
	if err != nil {
		var rerrs render.Errors
		if errors.As(err, &rerrs) {
			o.fail(rerrs.Reason(), rerrs.Error())
			return o, ctrl.Result{}, errors.Join(reconcile.TerminalError(err), r.enforceBlocked(ctx, wc, nil, &o))
		}
		return o, ctrl.Result{}, err
	}
	res, p := out.Result, out.Plan
	o.Rendered, o.Live = res, out.Live
	if ref := r.awaitingCache(p); ref != "" {
		// Nothing has failed and nothing is written: the pass comes back once the cache
		// holds what the last one created.
		log.FromContext(ctx).V(1).Info("waiting for the cache to hold a child this manager created", "child", ref)
		return o, ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	if p.Blocked() {
		r.rollBackUnfinished(ctx, wc, out.Live)
		o.Ladder = true
		o.fail(v1alpha1.ReasonOwnershipConflict, conflictMessage(p.Conflicts()))
		return o, ctrl.Result{RequeueAfter: conflictRequeue}, r.enforceBlocked(ctx, wc, res, &o)
	}
	if len(out.Invalid) > 0 {
		// Karpenter's CRDs would refuse part of the family: write none of it.
		msg := "Karpenter's CRDs refuse the rendered objects, so nothing is written: " + observe.InvalidMessage(out.Invalid)
		o.fail(v1alpha1.ReasonInvalidSpec, msg)
		return o, ctrl.Result{}, errors.Join(reconcile.TerminalError(errors.New(msg)), r.enforceBlocked(ctx, wc, res, &o))
	}
	if err := r.execute(ctx, wc, p, r.baselineEdit(wc, in.Baseline)); err != nil {
		var taken *nameTaken
		if errors.As(err, &taken) {
			// Found at create time (the plan only created, so it asked nothing first).
			r.taken.Store(wc.UID, true)
			r.rollBackUnfinished(ctx, wc, out.Live)
			o.Ladder = true
			o.fail(v1alpha1.ReasonOwnershipConflict, conflictMessage([]string{taken.ref}))
			return o, ctrl.Result{RequeueAfter: conflictRequeue}, r.enforceBlocked(ctx, wc, res, &o)
		}
		if apierrors.IsConflict(err) {
			// A child changed after the cache gave it to the plan (someone else writes it):
			// its watch event brings the class back to plan from the newer object, and
			// conflictRetry in case it does not. The class has not failed, so neither its
			// status nor an event says so.
			return o, ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		o.fail(v1alpha1.ReasonApplyFailed, err.Error())
		return o, ctrl.Result{}, errors.Join(err, r.enforceBlocked(ctx, wc, res, &o))
	}
	r.taken.Delete(wc.UID)
	r.seen.Store(wc.Name, baselineSeen{uid: in.Baseline.UID, generation: in.Baseline.Generation})
	o.Applied, o.Ladder, o.Retiring, o.Budget = true, true, p.Retiring(), out.Budget
	o.Drift, o.Changed = p.DriftNotice(), p.Changed()
	if o.Access, err = r.access(ctx, wc); err != nil {
		return o, ctrl.Result{}, err
	}
	o.Signals, o.CostBased = &in.Freshness, res.CostBased
	o.Commitments = in.Coverage
	wc.Status.Headroom = headroomStatus(res, out.Live, in.Inputs.Options.Headroom.Now)
	if err := r.checkPriorityClass(ctx, wc.Status.Headroom); err != nil {
		return o, ctrl.Result{}, err
	}
	if err := r.headroomFigures(ctx, wc, wc.Status.Headroom, res, out.Live); err != nil {
		return o, ctrl.Result{}, err
	}
	result := requeueForHeadroom(ctrl.Result{}, res, wc, in.Inputs.Options.Headroom.Now)
	result = requeueForCommitments(result, in.Coverage, r.CommitmentOpenDwell, in.Inputs.Options.Headroom.Now)
	return o, requeueForStaleness(result, in.Freshness, r.Signals.Clock()), nil
}

// finalize deletes the class's NodePools, then its EC2NodeClass, then lets the class go.
// Under prunePolicy Orphan it releases them instead.
func (r *WorkloadClassReconciler) finalize(ctx context.Context, wc *v1alpha1.WorkloadClass) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(wc, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	original := wc.DeepCopy()
	live, err := r.cluster(wc).Children(ctx, wc)
	if err == nil && len(live.Objects())+len(live.PolicyObjects())+len(live.HeadroomObjects()) == 0 {
		// The cache may trail this manager's own writes: a pass run from a cache that had
		// not yet seen the deletion (a watch re-established after an API server restart)
		// creates children moments before the deletion arrives. Let the class go only
		// once the API server itself holds none of them, or they outlive it.
		direct := r.cluster(wc)
		direct.Cached, direct.ClassIndexed = r.APIReader, false
		live, err = direct.Children(ctx, wc)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	// The AccessRule and the headroom go first and under every prune policy: an orphaned
	// rule would go on enforcing a class that no longer exists, and orphaned placeholders
	// would go on holding nodes for it.
	for _, obj := range append(live.PolicyObjects(), live.HeadroomObjects()...) {
		if err := r.deleteChild(ctx, wc, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	var waiting string
	switch {
	case wc.Spec.PrunePolicy == v1alpha1.PruneOrphan:
		for _, obj := range live.Objects() {
			if err := r.orphan(ctx, wc, obj); err != nil {
				return ctrl.Result{}, err
			}
		}
	case len(live.Ladder()) > 0:
		for _, obj := range live.Ladder() {
			if err := r.deleteChild(ctx, wc, obj); err != nil {
				return ctrl.Result{}, err
			}
		}
		waiting = fmt.Sprintf("deleting %d NodePools (%s) and %d NodeOverlays; the EC2NodeClass follows", len(live.NodePools), joinNames(slices.Sorted(maps.Keys(live.NodePools))), len(live.NodeOverlays))
	case live.NodeClass != nil:
		if err := r.deleteChild(ctx, wc, live.NodeClass); err != nil {
			return ctrl.Result{}, err
		}
		waiting = fmt.Sprintf("deleting EC2NodeClass %s", live.NodeClass.Name)
	}
	if waiting != "" {
		r.report(wc, outcome{Deleting: waiting}, nil)
		if err := r.writeStatus(ctx, original, wc); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: deletionRequeue}, nil
	}
	removeFinalizer(wc, v1alpha1.Finalizer)
	if err := r.releaseFinalizer(ctx, original, wc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	forgetClass(wc.Name)
	r.memo.Forget(wc.Name)
	r.seen.Delete(wc.Name)
	r.taken.Delete(wc.UID)
	return ctrl.Result{}, nil
}

// baselineEdit returns the Baseline when this pass carries an edit of it to a class its
// team has not changed since its last applied pass (the generation that pass rendered from
// is older); nil otherwise: the class's own edit, its first pass since the manager
// started, a hand edit reverted. A fan-out's updates are announced by one event on the
// Baseline (fanOutEvents), the others by an event on the class.
func (r *WorkloadClassReconciler) baselineEdit(wc *v1alpha1.WorkloadClass, b *v1alpha1.Baseline) *v1alpha1.Baseline {
	if wc.Status.ObservedGeneration != wc.Generation {
		return nil
	}
	v, ok := r.seen.Load(wc.Name)
	if !ok || v.(baselineSeen) == (baselineSeen{uid: b.UID, generation: b.Generation}) {
		return nil
	}
	return b
}

func (r *WorkloadClassReconciler) writeStatus(ctx context.Context, original, wc *v1alpha1.WorkloadClass) error {
	recordConditions(wc)
	if equality.Semantic.DeepEqual(original.Status, wc.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, wc, client.MergeFrom(original)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing status of WorkloadClass %s: %w", wc.Name, err))
	}
	if wc.DeletionTimestamp.IsZero() {
		r.remember(wc, original.ResourceVersion)
	}
	return nil
}

// specOrDeletion passes spec changes and the start of deletion, not status writes.
var specOrDeletion = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
})

// SetupWithManager watches classes, their children, and the Baselines they reference.
func (r *WorkloadClassReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr)
	own := builder.WithPredicates(r.notOwnWrite())
	if r.Capabilities.NodeOverlays {
		b = b.Owns(&karpv1alpha1.NodeOverlay{}, own)
	}
	if r.Capabilities.HeadroomOn() {
		// The cache holds only the headroom namespace's labelled Deployments, PodTemplates
		// and CapacityBuffers (internal/operator). A buffer's status is how Karpenter says
		// its units are ready.
		forget := builder.WithPredicates(r.forgetDeleted())
		b = b.Owns(&appsv1.Deployment{}, forget)
		if r.Capabilities.HeadroomBuffers {
			b = b.Owns(&corev1.PodTemplate{}, forget).Owns(&cbv1beta1.CapacityBuffer{}, forget)
		}
	}
	if r.Capabilities.AccessRules() {
		b = b.Owns(&v1alpha1.AccessRule{}, own).
			// The cache holds only namespaces that name a default class (see internal/operator).
			Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(classForNamespace))
	}
	return b.
		Named("workloadclass").
		For(&v1alpha1.WorkloadClass{}, builder.WithPredicates(specOrDeletion)).
		Owns(&karpv1.NodePool{}, own).
		Owns(&awsv1.EC2NodeClass{}, own).
		Watches(&v1alpha1.Baseline{}, handler.EnqueueRequestsFromMapFunc(r.classesForBaseline),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// The cache holds only the signals ConfigMap (see internal/operator).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.classesForSignals)).
		// A retired rung is deleted once its last NodeClaim is gone (that deletion changes
		// nothing on the NodePool when its status.nodes already read 0), and status counts
		// each rung's NodeClaims.
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(classOfNodeClaim), builder.WithPredicates(createsAndDeletes)).
		// A class with a budget, or whose Baseline declares commitments, is also priced
		// again when one of its NodeClaims launches (Karpenter sets its instance type):
		// that is when it starts to cost, and to use a commitment.
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(r.pricedClassOfNodeClaim), builder.WithPredicates(launches)).
		// A class's part of each commitment depends on its Baseline's other classes (their
		// teams, allocations and opt-outs).
		Watches(&v1alpha1.WorkloadClass{}, handler.EnqueueRequestsFromMapFunc(r.siblingsSharingCommitments), builder.WithPredicates(entitlementChanges)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// createsAndDeletes passes creations and deletions only.
var createsAndDeletes = predicate.Funcs{
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// launches passes a NodeClaim's launch: its instance type label set.
var launches = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetLabels()[corev1.LabelInstanceTypeStable] != e.ObjectNew.GetLabels()[corev1.LabelInstanceTypeStable]
	},
}

// pricedClassOfNodeClaim is classOfNodeClaim for classes with a budget (their own, or
// their Baseline's ceiling) or whose Baseline declares commitments: others do not price
// their NodeClaims, so a cluster without either has no traffic from launches.
func (r *WorkloadClassReconciler) pricedClassOfNodeClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	wc, baseline := classAndBaseline(ctx, r, obj)
	if wc == nil {
		return nil
	}
	if baseline != nil && baseline.Spec.Commitments != nil {
		return classOfNodeClaim(ctx, obj)
	}
	if budget, _ := render.ClassBudget(baseline, wc); budget == nil {
		return nil
	}
	return classOfNodeClaim(ctx, obj)
}

// classAndBaseline are a NodeClaim's class (nil when it has none, or it is gone) and that
// class's Baseline (nil when it does not exist), read from the cache.
func classAndBaseline(ctx context.Context, c client.Reader, obj client.Object) (*v1alpha1.WorkloadClass, *v1alpha1.Baseline) {
	reqs := classOfNodeClaim(ctx, obj)
	wc := &v1alpha1.WorkloadClass{}
	if len(reqs) == 0 || c.Get(ctx, reqs[0].NamespacedName, wc) != nil {
		return nil, nil
	}
	baseline := &v1alpha1.Baseline{}
	if c.Get(ctx, client.ObjectKey{Name: wc.BaselineName()}, baseline) != nil {
		return wc, nil
	}
	return wc, baseline
}

// classOfNodeClaim is the class a NodeClaim's rung belongs to, from its inherited label.
func classOfNodeClaim(_ context.Context, obj client.Object) []reconcile.Request {
	if class := obj.GetLabels()[v1alpha1.LabelClass]; class != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: class}}}
	}
	return nil
}

func (r *WorkloadClassReconciler) classesForBaseline(ctx context.Context, obj client.Object) []reconcile.Request {
	return listRequests(ctx, r, &v1alpha1.WorkloadClassList{}, client.MatchingFields{BaselineIndex: obj.GetName()})
}

// IndexBaselineName registers BaselineIndex.
func IndexBaselineName(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.WorkloadClass{}, BaselineIndex, func(o client.Object) []string {
		return []string{o.(*v1alpha1.WorkloadClass).BaselineName()}
	})
}

// IndexClassLabel registers observe.ClassIndex on NodePools and NodeClaims, which every
// pass of the WorkloadClass and cost controllers lists by class once their ClassIndexed
// says the cache has it.
func IndexClassLabel(ctx context.Context, mgr ctrl.Manager) error {
	for _, obj := range []client.Object{&karpv1.NodePool{}, &karpv1.NodeClaim{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, observe.ClassIndex, observe.ClassLabel); err != nil {
			return err
		}
	}
	return nil
}

// event records an event on the class; related names the child it concerns, if any.
func (r *WorkloadClassReconciler) event(wc *v1alpha1.WorkloadClass, related client.Object, eventtype, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(wc, related, eventtype, reason, action, format, args...)
	}
}

// entitlementChanges passes what changes the split of a Baseline's commitments: a class
// created or deleted, its labels (its team, the allocations' selectors) or its spec (its
// Baseline, spec.weighting.commitments) changed.
var entitlementChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// siblingsSharingCommitments are the other classes of the class's Baseline when it
// declares commitments: their entitlements change with it. A class moved to another
// Baseline is seen under its new one only; the old one's classes catch up at their next
// pass.
func (r *WorkloadClassReconciler) siblingsSharingCommitments(ctx context.Context, obj client.Object) []reconcile.Request {
	wc, ok := obj.(*v1alpha1.WorkloadClass)
	if !ok {
		return nil
	}
	baseline := &v1alpha1.Baseline{}
	if r.Get(ctx, client.ObjectKey{Name: wc.BaselineName()}, baseline) != nil || baseline.Spec.Commitments == nil {
		return nil
	}
	var out []reconcile.Request
	for _, req := range r.classesForBaseline(ctx, baseline) {
		if req.Name != wc.Name {
			out = append(out, req)
		}
	}
	return out
}

// addFinalizer and removeFinalizer are controllerutil's AddFinalizer and RemoveFinalizer
// for a class, through its own field: those set the finalizers with SetFinalizers called
// through client.Object, which kept that method of every API type in the binary alive
// (about 195 wrappers), nothing else calling it.
func addFinalizer(wc *v1alpha1.WorkloadClass, finalizer string) bool {
	if slices.Contains(wc.Finalizers, finalizer) {
		return false
	}
	wc.Finalizers = append(wc.Finalizers, finalizer)
	return true
}

func removeFinalizer(wc *v1alpha1.WorkloadClass, finalizer string) bool {
	f := wc.Finalizers
	kept := 0
	for _, name := range f {
		if name != finalizer {
			f[kept] = name
			kept++
		}
	}
	wc.Finalizers = f[:kept]
	return kept != len(f)
}
