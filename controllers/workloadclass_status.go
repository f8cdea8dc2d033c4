package controllers

import (
	"fmt"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
)

// setCondition sets one condition, stamped with the generation it was computed for.
// Its message names objects, never random values, so repeated passes do not churn it.
func setCondition(wc *v1alpha1.WorkloadClass, typ string, s metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&wc.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: wc.Generation,
	})
}

// notSynced records a pass that could not bring the children in line. Readiness is not
// assessed then. The event is emitted once per distinct failure, not on every retry or
// conflict requeue.
func (r *WorkloadClassReconciler) notSynced(wc *v1alpha1.WorkloadClass, reason, message string) {
	prev := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
	repeated := prev != nil && prev.Status == metav1.ConditionFalse && prev.Reason == reason && prev.Message == message
	setCondition(wc, v1alpha1.ConditionSynced, metav1.ConditionFalse, reason, message)
	setCondition(wc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotSynced, "the class is not Synced: "+reason)
	if !repeated {
		r.event(wc, nil, "Warning", reason, "Reconcile", "%s", message)
	}
}

// synced records a successful pass and summarises Karpenter's view of the children.
func (r *WorkloadClassReconciler) synced(wc *v1alpha1.WorkloadClass, res *render.Result, live plan.Children) {
	setCondition(wc, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied,
		fmt.Sprintf("EC2NodeClass %s and %d NodePools match the render", res.NodeClass.Name, len(res.NodePools)))
	s, reason, message := readiness(res, live)
	setCondition(wc, v1alpha1.ConditionReady, s, reason, message)
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

// setRungs reports the ladder: each rung's weight, slice and readiness, then any NodePool
// being retired.
func (r *WorkloadClassReconciler) setRungs(wc *v1alpha1.WorkloadClass, res *render.Result, live plan.Children, retiring []*karpv1.NodePool) {
	var out []v1alpha1.RungStatus
	for _, rung := range res.Rungs {
		s := v1alpha1.RungStatus{Name: rung.Name, Weight: rung.Weight, CapacityType: rung.CapacityType, Arch: rung.Arch, Slice: rung.Slice, Ready: metav1.ConditionUnknown, PriceSources: rung.PriceSources,
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
	wc.Status.NodePools = out
	wc.Status.PoolCount = int32(len(res.NodePools))
	rungs.WithLabelValues(wc.Name).Set(float64(len(res.NodePools)))
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
