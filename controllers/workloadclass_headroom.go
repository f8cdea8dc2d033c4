package controllers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
)

// The manager's grant on Deployments is a Role in the headroom namespace that the chart
// writes (templates/headroom.yaml), not a marker: controller-gen names every namespaced
// Role manager-role, and config/default's kustomization moves them all into one namespace,
// where two would collide. So is the watch on pods that a percentage's usage informer
// needs (observe.Usage; list is granted for cost and rebalance): a ClusterRole the chart
// installs only with the headroom, so a manager without one is granted no watch of pods.

// headroomStatus is status.headroom from the render and the live placeholder Deployment:
// ready is the Deployment's available replicas once it has observed its generation. A
// class without spec.headroom has none. The shrink timer and the count survive restarts
// here (internal/headroom reads them back through the render).
func headroomStatus(res *render.Result, live plan.Children) *v1alpha1.HeadroomStatus {
	h := res.Headroom
	if h == nil {
		return nil
	}
	st := &v1alpha1.HeadroomStatus{Mechanism: h.Mechanism, Rung: h.Rung, Desired: h.Desired, Reason: h.Reason, Window: h.Window}
	if !h.NextChange.IsZero() {
		st.NextChange = &metav1.Time{Time: h.NextChange.UTC().Truncate(time.Second)}
	}
	if h.PendingSince != nil {
		st.ShrinkPendingSince = &metav1.Time{Time: h.PendingSince.UTC().Truncate(time.Second)}
	}
	for _, want := range h.Objects {
		if d, ok := live.Headroom[want.Name]; ok && d.Status.ObservedGeneration == d.Generation {
			st.Ready += min(d.Status.AvailableReplicas, h.Desired)
		}
	}
	switch {
	case st.Reason != "":
		st.Message = headroomMessage(st.Reason)
	case st.Ready < st.Desired:
		st.Reason, st.Message = v1alpha1.HeadroomReasonProvisioning, fmt.Sprintf("%d of %d units wait for a node on rung %s", st.Desired-st.Ready, st.Desired, st.Rung)
	default:
		st.Reason = v1alpha1.HeadroomReasonReady
	}
	st.Display = fmt.Sprintf("%d/%d", st.Ready, st.Desired)
	return st
}

func headroomMessage(reason string) string {
	switch reason {
	case v1alpha1.HeadroomReasonDisabled:
		return "the manager runs with --headroom=off: no headroom is held"
	case v1alpha1.HeadroomReasonMechanismFallback:
		return "CapacityBuffer is not available from this manager: placeholder pods hold the headroom"
	case v1alpha1.HeadroomReasonClosed:
		return "no schedule window is open"
	case v1alpha1.HeadroomReasonCappedByLimits:
		return "spec.headroom.limits hold the count below its size"
	case v1alpha1.HeadroomReasonCappedByClassLimits:
		return "the class's spec.limits leave no room for more units"
	}
	return ""
}

// requeueForHeadroom brings the class back at its schedule's next edge, and every minute
// while a percentage-sized or not yet ready headroom may change.
func requeueForHeadroom(result ctrl.Result, res *render.Result, wc *v1alpha1.WorkloadClass, now time.Time) ctrl.Result {
	if res == nil || res.Headroom == nil || res.Headroom.Mechanism == v1alpha1.HeadroomOff {
		return result
	}
	after := time.Duration(0)
	if next := res.Headroom.NextChange; !next.IsZero() {
		after = max(next.Sub(now), time.Second)
	}
	if spec := wc.Spec.Headroom; res.Headroom.PendingSince != nil || (spec != nil && spec.Percentage != nil) {
		if after == 0 || after > time.Minute {
			after = time.Minute
		}
	}
	if after > 0 && (result.RequeueAfter == 0 || after < result.RequeueAfter) {
		result.RequeueAfter = after
	}
	return result
}
