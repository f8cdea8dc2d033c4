package controllers

import (
	"fmt"
	"sort"
	"strings"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// outcome is what one pass of the WorkloadClass reconciler found and did. Each field is
// filled as the pass reaches it, so a pass that stops early leaves the rest zero;
// setStatus turns it, with the pass's error, into every condition and status field.
type outcome struct {
	// Deleting names the children the finalizer still waits for; the class is going away.
	Deleting string
	// Failure is why the family was not written (Synced=False); nil when it was, or when
	// the pass stopped on an error it retries before reaching a verdict.
	Failure *failure
	// Rendered is the render the pass planned from; nil when the class did not render.
	Rendered *render.Result
	// Live are the children the plan was computed against.
	Live plan.Children
	// Ladder: status.nodePools reports the rendered ladder against Live (the plan was
	// carried out, or a foreign object blocked it).
	Ladder bool
	// Retiring are the NodePools no longer rendered that wait for their nodes to go.
	Retiring []*karpv1.NodePool
	// Applied: every write of the plan went through.
	Applied bool
	// Drift is the plan's drift notice; Changed is whether it wrote anything.
	Drift   string
	Changed bool
	// Access is what the pass found of the access rule; nil when it did not look.
	Access *access
	// Signals is the verdict on the spot signals the render priced with; nil when the pass
	// did not finish. CostBased: the class's weights come from prices.
	Signals   *signals.Freshness
	CostBased bool
	// Budget is the class's cost against its spec.budget, as the applied render held it
	// (or not); nil without a budget or when the pass applied nothing.
	Budget *cost.Verdict
	// Commitments are what the pass tracked of the Baseline's commitments for the class
	// (observe.Coverage); nil when the Baseline declares none.
	Commitments *observe.Coverage
}

// failure is a Synced=False verdict: its reason and message.
type failure struct {
	Reason, Message string
}

// fail records that the family is not written, and why.
func (o *outcome) fail(reason, message string) {
	o.Failure = &failure{Reason: reason, Message: message}
}

// access is what a pass found of the class's access rule and of the namespaces that name
// it their default.
type access struct {
	// Disabled: the manager runs with --access-policies=false.
	Disabled bool
	// NoDefaults: the API server serves no MutatingAdmissionPolicy, so namespace defaults
	// are not applied.
	NoDefaults bool
	// Defaults are the namespaces that name the class their default.
	Defaults []corev1.Namespace
	// Kept is the AccessRule kept enforcing while the family is not written (see
	// enforceBlocked).
	Kept *v1alpha1.AccessRule
}

// setStatus is the one place a WorkloadClass's conditions and status fields are set: it
// derives them from the pass's outcome and error. Every condition it sets is stamped with
// the generation it was computed for, and its messages name objects, never random values,
// so repeated passes do not churn them. Ready is True only beside Synced True: a pass
// that stops before a verdict (an error, a lost write race) never leaves a Ready=True of an
// older generation standing. It reports whether the pass met a Synced failure that the
// status did not already hold for this generation, which is announced by one event.
func setStatus(wc *v1alpha1.WorkloadClass, o outcome, err error) (newFailure bool) {
	st := &wc.Status
	set := func(typ string, s metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: wc.Generation,
		})
	}
	if o.Deleting != "" {
		set(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonDeleting, o.Deleting)
		return false
	}

	// A new generation is Reconciling until this pass reaches a verdict on it.
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); c == nil || c.ObservedGeneration != wc.Generation {
		set(v1alpha1.ConditionSynced, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, fmt.Sprintf("generation %d is not applied yet", wc.Generation))
	}
	prev := *meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced)

	if res := o.Rendered; res != nil {
		st.Profile = res.Profile
		st.NodeClass = res.NodeClass.Name
		if o.Ladder {
			st.NodePools = rungStatuses(res, o.Live, o.Retiring)
			st.PoolCount = int32(len(res.NodePools))
		}
	}

	switch {
	case o.Failure != nil:
		// Readiness is not assessed while the children are not in line.
		set(v1alpha1.ConditionSynced, metav1.ConditionFalse, o.Failure.Reason, o.Failure.Message)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: "+o.Failure.Reason)
		newFailure = !(prev.Status == metav1.ConditionFalse && prev.Reason == o.Failure.Reason && prev.Message == o.Failure.Message)
	case o.Applied:
		set(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied,
			fmt.Sprintf("EC2NodeClass %s and %d NodePools match the render", o.Rendered.NodeClass.Name, len(o.Rendered.NodePools)))
		s, reason, message := readiness(o.Rendered, o.Live)
		set(v1alpha1.ConditionReady, s, reason, message)
	case prev.Status != metav1.ConditionTrue:
		// No verdict on this generation yet: a Ready=True of an older one would be stale.
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
			set(v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonReconciling,
				fmt.Sprintf("generation %d is not applied yet; readiness is assessed once it is", wc.Generation))
		}
	}

	if a := o.Access; a != nil {
		if s, reason, message, ok := accessCondition(wc, a, o.Failure); ok {
			set(v1alpha1.ConditionAccess, s, reason, message)
		}
	}

	if o.Applied {
		if o.Drift != "" {
			st.DriftNotice = o.Drift
		} else if o.Changed {
			st.DriftNotice = ""
		}
	}

	if f := o.Signals; f != nil {
		if o.CostBased {
			set(v1alpha1.ConditionSignalsCurrent, metav1.ConditionStatus(f.Status), f.Reason, f.Message)
		} else {
			// A Static class uses no signals.
			meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionSignalsCurrent)
		}
	}

	if o.Applied {
		switch v := o.Budget; {
		case v == nil:
			meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionBudgetExceeded)
		case v.Hold:
			set(v1alpha1.ConditionBudgetExceeded, metav1.ConditionTrue, v1alpha1.ReasonBudgetHeld, v.Message())
		case v.Over:
			set(v1alpha1.ConditionBudgetExceeded, metav1.ConditionTrue, v1alpha1.ReasonBudgetWarned, v.Message())
		default:
			// No figure that changes with every launch: the condition does not churn.
			set(v1alpha1.ConditionBudgetExceeded, metav1.ConditionFalse, v1alpha1.ReasonUnderBudget,
				fmt.Sprintf("the class costs less than its budget of $%s/h; nothing is held", cost.Money(v.Budget))+underBudgetCap(v))
		}
	}

	if o.Applied {
		if cov := o.Commitments; cov == nil {
			st.Commitments = nil
			meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionCommitmentsCurrent)
		} else {
			// Commitments never stall the class: an entry left out is named here, and the
			// class renders without it.
			st.Commitments = classCommitments(cov, o.Rendered)
			s, reason, message := commitmentsCondition(cov)
			set(v1alpha1.ConditionCommitmentsCurrent, s, reason, message)
		}
	}

	if o.Applied && err == nil {
		st.ObservedGeneration = wc.Generation
	}
	return newFailure
}

// accessCondition is the Access condition for what the pass found: whether the class's
// access rule is enforced, and which namespaces name it their default; a default namespace
// the rule excludes is an error on the class. While the family is not written, it says
// that the rule kept lags the spec. ok is false when the pass leaves the condition as it
// is.
func accessCondition(wc *v1alpha1.WorkloadClass, a *access, blocked *failure) (s metav1.ConditionStatus, reason, message string, ok bool) {
	if blocked != nil {
		if a.Kept == nil || (wc.Spec.Access == nil && len(a.Kept.Spec.Access) == 0) {
			return "", "", "", false
		}
		return metav1.ConditionFalse, v1alpha1.ReasonAccessLagging,
			fmt.Sprintf("the NodePool family is not written (%s): AccessRule %s enforces access for %s, with the taints and rungs of the family that exists; a wider spec.access takes effect once the family is written", blocked.Reason, wc.Name, a.Kept.Spec.Allowed), true
	}
	if a.Disabled {
		return metav1.ConditionFalse, v1alpha1.ReasonAccessDisabled,
			"the manager runs with --access-policies=false: spec.access and namespace defaults are not enforced", true
	}
	var defaults, excluded []string
	for _, ns := range a.Defaults {
		defaults = append(defaults, ns.Name)
		if !wc.Spec.Access.Admits(ns.Name, ns.Labels) {
			excluded = append(excluded, ns.Name)
		}
	}
	sort.Strings(defaults)
	sort.Strings(excluded)
	switch {
	case len(excluded) > 0:
		return metav1.ConditionFalse, v1alpha1.ReasonDefaultExcluded,
			fmt.Sprintf("namespaces %s name this class their default (%s) but spec.access excludes them: their pods get no defaults from it", strings.Join(excluded, ", "), v1alpha1.LabelDefaultClass), true
	case a.NoDefaults:
		return metav1.ConditionFalse, v1alpha1.ReasonDefaultsUnavailable,
			"the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: namespace defaults (" + v1alpha1.LabelDefaultClass + ") are not applied; access rules are still enforced" + defaultsFor(defaults), true
	case wc.Spec.Access == nil:
		return metav1.ConditionTrue, v1alpha1.ReasonAccessOpen, "no access rule: any namespace may use the class" + defaultsFor(defaults), true
	default:
		return metav1.ConditionTrue, v1alpha1.ReasonAccessEnforced,
			fmt.Sprintf("ValidatingAdmissionPolicy %s refuses pods of other namespaces that could run on the class, through AccessRule %s%s", render.AccessPolicyName, wc.Name, defaultsFor(defaults)), true
	}
}

func defaultsFor(namespaces []string) string {
	if len(namespaces) == 0 {
		return ""
	}
	return "; default class of namespaces " + strings.Join(namespaces, ", ")
}

// underBudgetCap says, under mode Enforce, that each rung's CPU limit is capped at what
// the money left buys (render.Options.BudgetLeft), without the figure, which changes with
// every launch.
func underBudgetCap(v *cost.Verdict) string {
	if v.Mode != v1alpha1.BudgetEnforce {
		return ""
	}
	return ", and each rung's cpu limit is capped at what the budget left buys at its dearest price per vCPU"
}

// report sets the status from the pass's outcome and error (setStatus), and emits what
// goes with it: one Warning event per distinct Synced failure, not one on every retry or
// conflict requeue, and the rung gauge.
func (r *WorkloadClassReconciler) report(wc *v1alpha1.WorkloadClass, o outcome, err error) {
	// The class this pass read may trail the last pass's write (another controller wrote
	// status in between): the verdict last announced is remembered, so it is announced once.
	wasOver := meta.IsStatusConditionTrue(wc.Status.Conditions, v1alpha1.ConditionBudgetExceeded)
	if last, ok := r.budgetOver.Load(wc.Name); ok {
		wasOver = last.(bool)
	}
	if setStatus(wc, o, err) {
		r.event(wc, nil, "Warning", o.Failure.Reason, "Reconcile", "%s", o.Failure.Message)
	}
	if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionBudgetExceeded); c != nil {
		over := c.Status == metav1.ConditionTrue
		switch {
		case over && !wasOver:
			r.event(wc, nil, "Warning", v1alpha1.ConditionBudgetExceeded, "Budget", "%s", c.Message)
		case !over && wasOver:
			r.event(wc, nil, "Normal", v1alpha1.ReasonUnderBudget, "Budget", "%s", c.Message)
		}
		recordBudget(wc.Name, &over)
		r.budgetOver.Store(wc.Name, over)
	} else {
		recordBudget(wc.Name, nil)
		r.budgetOver.Delete(wc.Name)
	}
	if o.Ladder && o.Rendered != nil {
		rungs.WithLabelValues(wc.Name).Set(float64(len(o.Rendered.NodePools)))
	}
	r.announceCommitments(wc, o)
}

// readiness is Ready True only when Karpenter reports every child Ready; False names the
// first failing child and its failing condition; Unknown until Karpenter reports.
func readiness(res *render.Result, live plan.Children) (metav1.ConditionStatus, string, string) {
	var waiting []string
	if live.NodeClass == nil {
		waiting = append(waiting, "EC2NodeClass/"+res.NodeClass.Name)
	} else if s, msg := childReady(live.NodeClass.Status.Conditions); s == metav1.ConditionFalse {
		return metav1.ConditionFalse, v1alpha1.ReasonNodeClassNotReady, fmt.Sprintf("EC2NodeClass %s: %s", live.NodeClass.Name, msg)
	} else if s != metav1.ConditionTrue {
		waiting = append(waiting, "EC2NodeClass/"+live.NodeClass.Name)
	}
	for _, want := range res.NodePools {
		np, ok := live.NodePools[want.Name]
		if !ok {
			waiting = append(waiting, "NodePool/"+want.Name)
			continue
		}
		switch s, msg := childReady(np.Status.Conditions); s {
		case metav1.ConditionFalse:
			return metav1.ConditionFalse, v1alpha1.ReasonNodePoolNotReady, fmt.Sprintf("NodePool %s: %s", np.Name, msg)
		case metav1.ConditionUnknown:
			waiting = append(waiting, "NodePool/"+np.Name)
		}
	}
	if len(waiting) > 0 {
		return metav1.ConditionUnknown, v1alpha1.ReasonAwaitingKarpenter, "Karpenter has not reported Ready for " + joinNames(waiting)
	}
	return metav1.ConditionTrue, v1alpha1.ReasonAllReady, fmt.Sprintf("Karpenter reports EC2NodeClass %s and %d NodePools Ready", res.NodeClass.Name, len(res.NodePools))
}

// childReady reads a Karpenter object's Ready condition; when it is False the message
// names the condition that fails it.
func childReady(conds []status.Condition) (metav1.ConditionStatus, string) {
	var ready *status.Condition
	for i := range conds {
		if conds[i].Type == status.ConditionReady {
			ready = &conds[i]
		}
	}
	if ready == nil {
		return metav1.ConditionUnknown, ""
	}
	if ready.Status != metav1.ConditionFalse {
		return ready.Status, ready.Message
	}
	for _, c := range conds {
		if c.Type != status.ConditionReady && c.Status == metav1.ConditionFalse {
			return metav1.ConditionFalse, fmt.Sprintf("%s=False (%s): %s", c.Type, c.Reason, c.Message)
		}
	}
	return metav1.ConditionFalse, fmt.Sprintf("Ready=False (%s): %s", ready.Reason, ready.Message)
}

// rungStatuses report the ladder: each rung's weight, slice and readiness, then any
// NodePool being retired.
func rungStatuses(res *render.Result, live plan.Children, retiring []*karpv1.NodePool) []v1alpha1.RungStatus {
	var out []v1alpha1.RungStatus
	for _, rung := range res.Rungs {
		s := v1alpha1.RungStatus{Name: rung.Name, Weight: rung.Weight, CapacityType: rung.CapacityType, Arch: rung.Arch, Slice: rung.Slice, Ready: metav1.ConditionUnknown, PriceSources: rung.PriceSources, Commitment: rung.Commitment,
			Nodes: int32(len(live.NodeClaims[rung.Name]))}
		s.Reason = fmt.Sprintf("weight %d: %s", rung.Weight, rung.WeightReason)
		if np, ok := live.NodePools[rung.Name]; ok {
			st, msg := childReady(np.Status.Conditions)
			s.Ready = st
			if st == metav1.ConditionFalse {
				s.Reason = msg
			}
		}
		out = append(out, s)
	}
	for _, np := range retiring {
		nodes := "unknown"
		if np.Status.Nodes != nil {
			nodes = fmt.Sprint(*np.Status.Nodes)
		}
		out = append(out, v1alpha1.RungStatus{Name: np.Name, Weight: ptrValue(np.Spec.Weight), Ready: metav1.ConditionFalse, Nodes: int32(len(live.NodeClaims[np.Name])),
			CapacityType: v1alpha1.CapacityType(pinned(np, karpv1.CapacityTypeLabelKey)), Arch: v1alpha1.Architecture(pinned(np, corev1.LabelArchStable)),
			Reason: fmt.Sprintf("Retiring: no longer rendered; limits are zero and it is deleted once it has no nodes (nodes: %s)", nodes)})
	}
	return out
}

// pinned is the single value a rung's In requirement pins key to.
func pinned(np *karpv1.NodePool, key string) string {
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
