package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/rebalance"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// examinedPerPass bounds the candidates whose pods are read in one pass.
const examinedPerPass = 5

// RebalanceReconciler carries out spec.rebalance for each WorkloadClass.
type RebalanceReconciler struct {
	// Client reads the cache: classes, Baselines, the classes' NodePools and NodeClaims.
	client.Client
	// APIReader reads pods, nodes, PodDisruptionBudgets and events past the cache, and
	// only for nodes about to move: they are not cached.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Signals   *signals.Provider
	Region    string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Recheck, when set, is the longest wait before a class with pending moves or nodes
	// on fallback rungs is looked at again, instead of rebalance.Recheck: pods and
	// PodDisruptionBudgets are not watched (the controller tests shorten it).
	Recheck time.Duration
}

// +kubebuilder:rbac:groups=poolsmith.dev,resources=workloadclasses,verbs=get
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list

// Reconcile settles finished moves, then starts moves up the ladder where the evidence
// allows, and writes status.rebalance once.
func (r *RebalanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wc := &v1alpha1.WorkloadClass{}
	if err := r.Get(ctx, req.NamespacedName, wc); err != nil {
		if apierrors.IsNotFound(err) {
			forgetRebalance(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A class or Baseline that does not decode whole (internal/decode) is reported by the
	// WorkloadClass controller; nothing moves on settings read from part of it.
	if !wc.DeletionTimestamp.IsZero() || decode.Error(wc) != "" {
		return ctrl.Result{}, nil
	}
	// The class's inputs as the WorkloadClass controller gathers them (no signals: the
	// settings need none). Without a Baseline the class's values and the defaults decide.
	inputs, err := observe.Source{Reader: r.Client}.Assemble(ctx, wc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if inputs.Baseline != nil && decode.Error(inputs.Baseline) != "" {
		return ctrl.Result{}, nil
	}
	settings, err := resolveRebalance(inputs.Inputs)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	claims, rungs, err := r.read(ctx, wc)
	if err != nil {
		return ctrl.Result{}, err
	}
	marked := slices.ContainsFunc(slices.Collect(maps.Values(claims)), rebalance.IsMarked)
	if settings.Policy != v1alpha1.RebalancePreferred && wc.Status.Rebalance == nil && !marked {
		return ctrl.Result{}, nil // never enabled: no status to write, and no request sent
	}
	// From here read past the cache: status.rebalance is this controller's memory of its
	// moves, and the cache may not hold its last write yet.
	if err := r.APIReader.Get(ctx, req.NamespacedName, wc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// inputs.Class is wc, now as the API server holds it.
	if settings, err = resolveRebalance(inputs.Inputs); err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	in := rebalance.Input{Now: r.now(), Settings: settings, Rungs: rungs}
	if wc.Status.Rebalance != nil {
		in.Status = *wc.Status.Rebalance
	}
	for _, nc := range claims {
		in.Nodes = append(in.Nodes, rebalance.Node{NodeClaim: nc.Name, Rung: nc.Labels[karpv1.NodePoolLabelKey], Created: nc.CreationTimestamp.Time,
			Deleting: !nc.DeletionTimestamp.IsZero(), Marked: rebalance.IsMarked(nc)})
	}
	pass := rebalance.Decide(in)
	st := pass.Status
	for _, o := range pass.Outcomes {
		r.event(wc, o.Reason, o.Message)
		rebalanceMoves.WithLabelValues(wc.Name, rebalanceOutcome(o.Reason)).Inc()
	}
	unmark := pass.Unmark
	// Off, or held at the budget (no replacement could launch): no move stays under way.
	if settings.Policy != v1alpha1.RebalancePreferred || heldAtBudget(wc) {
		st.Moving = nil
		for _, nc := range claims {
			if rebalance.IsMarked(nc) && nc.DeletionTimestamp.IsZero() {
				unmark = append(unmark, nc.Name)
			}
		}
	}
	recorded := originalHashes(in.Status.Moving)
	for _, name := range unmark {
		if err := r.unmark(ctx, claims[name], recorded[name]); err != nil {
			return ctrl.Result{}, err
		}
	}
	if settings.Policy == v1alpha1.RebalancePreferred {
		if err := r.cancelBlocked(ctx, wc, &st, claims); err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case heldAtBudget(wc):
			// The rungs' limits are held at their usage: a move's replacement could not launch.
			if len(pass.Candidates) > 0 {
				st.Message = "moves are suspended while the class is held at its budget (BudgetExceeded): no replacement could launch"
			}
		case pass.Slots > 0 && len(pass.Candidates) > 0:
			if err := r.start(ctx, wc, settings, &st, pass, claims, rungs); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	recordRebalance(wc.Name, st, in.Now)
	if err := r.writeStatus(ctx, wc, st); err != nil {
		return ctrl.Result{}, err
	}
	if r.Recheck > 0 && pass.RequeueAfter > r.Recheck {
		pass.RequeueAfter = r.Recheck
	}
	return ctrl.Result{RequeueAfter: pass.RequeueAfter}, nil
}

// heldAtBudget: the WorkloadClass controller holds the class's rungs at their usage.
func heldAtBudget(wc *v1alpha1.WorkloadClass) bool {
	c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionBudgetExceeded)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonBudgetHeld
}

// resolveRebalance is the class's spec.rebalance as the renderer resolves it (in.Class
// is the copy last read).
func resolveRebalance(in render.Inputs) (rebalance.Settings, error) {
	s := render.Resolve(in)
	return rebalance.Settings(s.Rebalance), s.RebalanceErr
}

// read lists the class's NodeClaims (by name) and its rungs from the cache.
func (r *RebalanceReconciler) read(ctx context.Context, wc *v1alpha1.WorkloadClass) (map[string]*karpv1.NodeClaim, []rebalance.Rung, error) {
	pools := &karpv1.NodePoolList{}
	if err := r.List(ctx, pools, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: wc.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing NodePools of WorkloadClass %s: %w", wc.Name, err)
	}
	var rungs []rebalance.Rung
	for i := range pools.Items {
		np := &pools.Items[i]
		// A retiring rung (no longer rendered) is no destination and not a fallback.
		if metav1.IsControlledBy(np, wc) && np.DeletionTimestamp.IsZero() && !metav1.HasAnnotation(np.ObjectMeta, v1alpha1.AnnotationRetired) {
			rungs = append(rungs, rebalance.NewRung(np))
		}
	}
	list := &karpv1.NodeClaimList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: wc.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing NodeClaims of WorkloadClass %s: %w", wc.Name, err)
	}
	claims := map[string]*karpv1.NodeClaim{}
	for i := range list.Items {
		claims[list.Items[i].Name] = &list.Items[i]
	}
	return claims, rungs, nil
}

// start examines candidates oldest first and marks those whose pods a higher rung can
// host, whose target rung can be expected to launch, and that nothing pins.
func (r *RebalanceReconciler) start(ctx context.Context, wc *v1alpha1.WorkloadClass, s rebalance.Settings, st *v1alpha1.RebalanceStatus, pass rebalance.Pass, claims map[string]*karpv1.NodeClaim, rungs []rebalance.Rung) error {
	if err := r.evidence(ctx, rungs); err != nil {
		return err
	}
	slots := pass.Slots
	var held []string
	for i, n := range pass.Candidates {
		if slots == 0 || i == examinedPerPass {
			break
		}
		nc := claims[n.NodeClaim]
		pods, node, err := r.podsOn(ctx, nc)
		if err != nil {
			return err
		}
		if node == nil {
			held = append(held, fmt.Sprintf("NodeClaim %s has no node yet", nc.Name))
			continue
		}
		// What pins a node is reported first: it holds whatever the capacity does.
		pdbs, err := r.pdbsFor(ctx, pods)
		if err != nil {
			return err
		}
		if b := rebalance.Blocker(nc, node, pods, pdbs); b != "" {
			held = append(held, fmt.Sprintf("NodeClaim %s is blocked: %s", nc.Name, b))
			continue
		}
		target, ok := rebalance.Target(rungs, n.Rung, pods)
		if !ok {
			held = append(held, fmt.Sprintf("NodeClaim %s: no rung above %s can host its pods", nc.Name, n.Rung))
			continue
		}
		if why := target.Unavailable(s, r.now(), nc.Status.Capacity); why != "" {
			held = append(held, fmt.Sprintf("NodeClaim %s stays on %s: %s", nc.Name, n.Rung, why))
			continue
		}
		original := nc.Annotations[karpv1.NodePoolHashAnnotationKey]
		if err := r.mark(ctx, nc); err != nil {
			return err
		}
		m := v1alpha1.RebalanceMove{NodeClaim: nc.Name, From: n.Rung, To: target.Name, Started: metav1.Time{Time: r.now().Truncate(time.Second)}, OriginalHash: original}
		st.Moving = append(st.Moving, m)
		st.Started++
		slots--
		rebalanceMoves.WithLabelValues(wc.Name, "started").Inc()
		r.event(wc, v1alpha1.ReasonRebalanceStarted, fmt.Sprintf("NodeClaim %s marked drifted: Karpenter replaces it, moving its pods from %s toward %s", nc.Name, n.Rung, target.Name))
	}
	switch {
	case len(held) > 0:
		st.Message = truncate(strings.Join(held, "; "))
	case len(st.Moving) > 0:
		st.Message = "moving " + rebalance.MovingNames(st.Moving)
	}
	return nil
}

// cancelBlocked removes the mark from moving nodes a blocker appeared on before Karpenter
// began disrupting them (with a terminationGracePeriod, Karpenter's drift would not wait).
func (r *RebalanceReconciler) cancelBlocked(ctx context.Context, wc *v1alpha1.WorkloadClass, st *v1alpha1.RebalanceStatus, claims map[string]*karpv1.NodeClaim) error {
	var keep []v1alpha1.RebalanceMove
	for _, m := range st.Moving {
		nc := claims[m.NodeClaim]
		if nc == nil || !nc.DeletionTimestamp.IsZero() {
			keep = append(keep, m)
			continue
		}
		pods, node, err := r.podsOn(ctx, nc)
		if err != nil {
			return err
		}
		if node != nil && disrupting(node) {
			keep = append(keep, m)
			continue
		}
		pdbs, err := r.pdbsFor(ctx, pods)
		if err != nil {
			return err
		}
		b := rebalance.Blocker(nc, node, pods, pdbs)
		if b == "" {
			keep = append(keep, m)
			continue
		}
		if err := r.unmark(ctx, nc, m.OriginalHash); err != nil {
			return err
		}
		rebalanceMoves.WithLabelValues(wc.Name, "cancelled").Inc()
		r.event(wc, v1alpha1.ReasonRebalanceCancelled, fmt.Sprintf("NodeClaim %s is no longer moved: %s", nc.Name, b))
		st.Message = truncate(fmt.Sprintf("NodeClaim %s is blocked: %s", nc.Name, b))
	}
	st.Moving = keep
	return nil
}

// disrupting: Karpenter has begun disrupting the node (its disrupted taint is set).
func disrupting(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey })
}

// evidence fills each rung's spot signals and last capacity error.
func (r *RebalanceReconciler) evidence(ctx context.Context, rungs []rebalance.Rung) error {
	cat, fresh, err := r.Signals.Catalog(ctx, r.Client)
	if err != nil {
		return err
	}
	list := &corev1.EventList{}
	if err := r.APIReader.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.AndSelectors(
		fields.OneTermEqualSelector("reason", "InsufficientCapacityError"),
		fields.OneTermEqualSelector("involvedObject.kind", "NodeClaim"))}); err != nil {
		return fmt.Errorf("listing InsufficientCapacityError events: %w", err)
	}
	last := map[string]time.Time{}
	for _, e := range list.Items {
		rung := rebalance.CapacityErrorRung(e.InvolvedObject.Name)
		if t := eventTime(&e); t.After(last[rung]) {
			last[rung] = t
		}
	}
	for i := range rungs {
		rungs[i].SignalsProblem = rebalance.SignalsProblem(fresh)
		if rungs[i].Spot {
			rungs[i].Bucket = rebalance.LowestBucket(cat, r.Region, rungs[i].NodePool.Spec.Template.Spec.Requirements)
		}
		rungs[i].LastCapacityError = last[rungs[i].Name]
	}
	return nil
}

func eventTime(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, c := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// podsOn reads the node of a NodeClaim and the pods a move would evict from it; node is
// nil while the NodeClaim has none.
func (r *RebalanceReconciler) podsOn(ctx context.Context, nc *karpv1.NodeClaim) ([]*corev1.Pod, *corev1.Node, error) {
	if nc.Status.NodeName == "" {
		return nil, nil, nil
	}
	node := &corev1.Node{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("getting node %s: %w", nc.Status.NodeName, err)
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.MatchingFields{"spec.nodeName": nc.Status.NodeName}); err != nil {
		return nil, nil, fmt.Errorf("listing pods on node %s: %w", nc.Status.NodeName, err)
	}
	return rebalance.Moving(pods.Items), node, nil
}

// pdbsFor lists the PodDisruptionBudgets of the pods' namespaces.
func (r *RebalanceReconciler) pdbsFor(ctx context.Context, pods []*corev1.Pod) ([]policyv1.PodDisruptionBudget, error) {
	namespaces := map[string]bool{}
	for _, p := range pods {
		namespaces[p.Namespace] = true
	}
	var out []policyv1.PodDisruptionBudget
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		list := &policyv1.PodDisruptionBudgetList{}
		if err := r.APIReader.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing PodDisruptionBudgets in %s: %w", ns, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// mark makes Karpenter see the NodeClaim statically drifted: its nodepool-hash no longer
// matches its NodePool's, at the same hash version. The caller records the original hash
// in status.
func (r *RebalanceReconciler) mark(ctx context.Context, nc *karpv1.NodeClaim) error {
	orig := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodePoolHashAnnotationKey] = v1alpha1.RebalanceDriftHash
	if err := r.Patch(ctx, nc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("marking NodeClaim %s drifted: %w", nc.Name, err)
	}
	return nil
}

// originalHashes are the hashes recorded when each move started, by NodeClaim.
func originalHashes(moving []v1alpha1.RebalanceMove) map[string]string {
	out := make(map[string]string, len(moving))
	for _, m := range moving {
		out[m.NodeClaim] = m.OriginalHash
	}
	return out
}

// unmark gives the NodeClaim back a hash that Karpenter does not see drifted, so it clears
// its Drifted condition: the one recorded in status when Poolsmith marked it. Nothing on
// the NodeClaim is trusted for it: a mark with no record (set by hand, or whose status
// write was lost) gets its NodePool's current hash, or none where the NodePool has none
// (Karpenter then sees no static drift either).
func (r *RebalanceReconciler) unmark(ctx context.Context, nc *karpv1.NodeClaim, recorded string) error {
	if nc == nil || !rebalance.IsMarked(nc) {
		return nil
	}
	original := recorded
	if original == "" {
		np := &karpv1.NodePool{}
		if err := r.Get(ctx, client.ObjectKey{Name: nc.Labels[karpv1.NodePoolLabelKey]}, np); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("getting NodePool %s of NodeClaim %s: %w", nc.Labels[karpv1.NodePoolLabelKey], nc.Name, err)
		}
		original = np.Annotations[karpv1.NodePoolHashAnnotationKey]
	}
	orig := nc.DeepCopy()
	if original == "" {
		delete(nc.Annotations, karpv1.NodePoolHashAnnotationKey)
	} else {
		nc.Annotations[karpv1.NodePoolHashAnnotationKey] = original
	}
	delete(nc.Annotations, v1alpha1.AnnotationRebalanceHash)
	if err := r.Patch(ctx, nc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("unmarking NodeClaim %s: %w", nc.Name, err))
	}
	return nil
}

func (r *RebalanceReconciler) writeStatus(ctx context.Context, wc *v1alpha1.WorkloadClass, st v1alpha1.RebalanceStatus) error {
	if wc.Status.Rebalance != nil && equality.Semantic.DeepEqual(*wc.Status.Rebalance, st) {
		return nil
	}
	orig := wc.DeepCopy()
	wc.Status.Rebalance = &st
	if err := r.Status().Patch(ctx, wc, client.MergeFrom(orig)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing status.rebalance of WorkloadClass %s: %w", wc.Name, err))
	}
	return nil
}

func (r *RebalanceReconciler) event(wc *v1alpha1.WorkloadClass, reason, msg string) {
	if r.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if reason == v1alpha1.ReasonRebalanceFailed {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(wc, nil, typ, reason, "Rebalance", "%s", msg)
}

func (r *RebalanceReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func truncate(s string) string {
	const limit = 1024
	if len(s) > limit {
		return s[:limit-3] + "..."
	}
	return s
}

// nodeClaimChanges passes what can change a decision: a NodeClaim created, deleted,
// re-annotated, registered, or being deleted.
var nodeClaimChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*karpv1.NodeClaim), e.ObjectNew.(*karpv1.NodeClaim)
		return !equality.Semantic.DeepEqual(o.Annotations, n.Annotations) || o.Status.NodeName != n.Status.NodeName ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	},
}

// SetupWithManager watches classes and their NodeClaims.
func (r *RebalanceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("rebalance").
		For(&v1alpha1.WorkloadClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if class := o.GetLabels()[v1alpha1.LabelClass]; class != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: class}}}
			}
			return nil
		}), builder.WithPredicates(nodeClaimChanges)).
		Complete(r)
}
