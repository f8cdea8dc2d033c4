package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

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
// That ClusterRole also grants get on the one PriorityClass the placeholders name
// (checkPriorityClass).

// headroomStatus is status.headroom from the render and the live children: ready is the
// placeholder Deployment's available replicas once it has observed its generation (Pods),
// or what Karpenter reports of the CapacityBuffer (bufferReady). A class without
// spec.headroom has none. The shrink timer and the count survive restarts here
// (internal/headroom reads them back through the render).
func headroomStatus(res *render.Result, live plan.Children, now time.Time) *v1alpha1.HeadroomStatus {
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
	var bufferReason, bufferMessage string
	for _, want := range h.Objects {
		switch l := live.Headroom[plan.HeadroomRef(want)].(type) {
		case *appsv1.Deployment:
			if l.Status.ObservedGeneration == l.Generation {
				st.Ready += min(l.Status.AvailableReplicas, h.Desired)
			}
		case *cbv1beta1.CapacityBuffer:
			var ready int32
			ready, bufferReason, bufferMessage = bufferReady(l, h.Desired, now)
			st.Ready += ready
		}
	}
	switch {
	case st.Reason != "":
		st.Message = h.Message
		if st.Message == "" {
			st.Message = headroomMessage(st.Reason)
		}
	case bufferReason != "" && st.Ready < st.Desired:
		st.Reason, st.Message = bufferReason, bufferMessage
	case st.Ready < st.Desired:
		st.Reason, st.Message = v1alpha1.HeadroomReasonProvisioning, fmt.Sprintf("%d of %d units wait for a node on rung %s", st.Desired-st.Ready, st.Desired, st.Rung)
	default:
		st.Reason = v1alpha1.HeadroomReasonReady
	}
	st.Display = fmt.Sprintf("%d/%d", st.Ready, st.Desired)
	return st
}

// checkPriorityClass reports PriorityClassMissing on st when placeholder pods hold units
// (mechanism Pods, desired above 0) and their PriorityClass does not exist: the API
// server's Priority admission plugin then refuses every placeholder pod, so no unit can be
// placed or replaced. It overrides every other reason, which all wait for something this
// blocks; ready stays what the Deployment reports (placeholders admitted before the
// PriorityClass went keep their priority and still run). It is one get of that name past
// the cache per pass, which its grant (get, resourceNames: the one name) allows; a
// cached watch would need list and watch on every PriorityClass.
func (r *WorkloadClassReconciler) checkPriorityClass(ctx context.Context, st *v1alpha1.HeadroomStatus) error {
	if st == nil || st.Mechanism != v1alpha1.HeadroomPods || st.Desired == 0 {
		return nil
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: v1alpha1.HeadroomPriorityClass}, &schedulingv1.PriorityClass{})
	switch {
	case apierrors.IsNotFound(err):
		st.Reason = v1alpha1.HeadroomReasonPriorityClassMissing
		st.Message = fmt.Sprintf("PriorityClass %s does not exist, so the API server refuses the placeholder pods that name it: "+
			"install it with the chart's headroom.enabled=true (or create it with a negative value and preemptionPolicy: Never)", v1alpha1.HeadroomPriorityClass)
		return nil
	case err != nil:
		return fmt.Errorf("reading PriorityClass %s: %w", v1alpha1.HeadroomPriorityClass, err)
	}
	return nil
}

// bufferNotObserved is how long Karpenter may leave a new CapacityBuffer without a
// ReadyForProvisioning condition before status says NotObserved: its buffer controller
// resolves one within seconds and retries every 30 s, so this long means it does not run
// (the CapacityBuffer feature gate is off, or Karpenter is down).
const bufferNotObserved = 2 * time.Minute

// bufferReady is what Karpenter reports of a class's CapacityBuffer: all desired units
// ready when its provisioner last found every virtual pod fits existing capacity
// (Provisioning=True, FitsExistingCapacity) for the buffer's current generation at
// status.replicas equal to desired; else none, with Karpenter's reason and message. The
// condition is all or nothing, and Karpenter counts a NodeClaim launched but not yet a
// node as existing capacity, so on AWS ready can count units whose instance still boots
// (docs/headroom.md). A condition for an older generation is not trusted (the count
// changed since); NotObserved when Karpenter has never resolved a buffer created
// bufferNotObserved ago.
func bufferReady(cb *cbv1beta1.CapacityBuffer, desired int32, now time.Time) (int32, string, string) {
	ref := "CapacityBuffer " + cb.Namespace + "/" + cb.Name
	resolved := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ReadyForProvisioningCondition)
	if resolved == nil && now.Sub(cb.CreationTimestamp.Time) > bufferNotObserved {
		return 0, v1alpha1.HeadroomReasonNotObserved, fmt.Sprintf("Karpenter has not resolved %s in %s: its CapacityBuffer feature gate may be off", ref, bufferNotObserved)
	}
	if resolved == nil || resolved.ObservedGeneration != cb.Generation {
		return 0, v1alpha1.HeadroomReasonProvisioning, fmt.Sprintf("waiting for Karpenter to resolve %s at generation %d", ref, cb.Generation)
	}
	provisioning := meta.FindStatusCondition(cb.Status.Conditions, cbv1beta1.ProvisioningCondition)
	switch {
	case resolved.Status != metav1.ConditionTrue:
		return 0, v1alpha1.HeadroomReasonProvisioning, fmt.Sprintf("Karpenter's %s: %s=%s %s: %s", ref, resolved.Type, resolved.Status, resolved.Reason, resolved.Message)
	case provisioning == nil || provisioning.ObservedGeneration != cb.Generation:
		return 0, v1alpha1.HeadroomReasonProvisioning, fmt.Sprintf("waiting for Karpenter's provisioner to place %s", ref)
	case provisioning.Status == metav1.ConditionTrue && ptr.Deref(cb.Status.Replicas, -1) == desired:
		return desired, "", ""
	}
	return 0, v1alpha1.HeadroomReasonProvisioning, fmt.Sprintf("Karpenter's %s: %s=%s %s: %s", ref, provisioning.Type, provisioning.Status, provisioning.Reason, provisioning.Message)
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
	// A CapacityBuffer's status may stay as it is (NotObserved has no event to wait for),
	// and no watch announces a PriorityClass created.
	st := wc.Status.Headroom
	waiting := st != nil && ((st.Mechanism == v1alpha1.HeadroomCapacityBuffer && st.Ready < st.Desired) || st.Reason == v1alpha1.HeadroomReasonPriorityClassMissing)
	if spec := wc.Spec.Headroom; waiting || res.Headroom.PendingSince != nil || (spec != nil && spec.Percentage != nil) {
		if after == 0 || after > time.Minute {
			after = time.Minute
		}
	}
	if after > 0 && (result.RequeueAfter == 0 || after < result.RequeueAfter) {
		result.RequeueAfter = after
	}
	return result
}
