package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// TestBufferReady reads a CapacityBuffer's status as Karpenter v1.15.0 writes it: all
// units ready only on Provisioning=True for the current generation and count.
func TestBufferReady(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	cond := func(typ string, status metav1.ConditionStatus, reason string, generation int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message", ObservedGeneration: generation}
	}
	resolved := cond(cbv1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, "Resolved", 3)
	for _, tc := range []struct {
		name       string
		age        time.Duration
		replicas   *int32
		conditions []metav1.Condition
		ready      int32
		reason     string
		message    string
	}{
		{"fits existing capacity", time.Hour, ptr.To[int32](2), []metav1.Condition{resolved, cond(cbv1beta1.ProvisioningCondition, metav1.ConditionTrue, "FitsExistingCapacity", 3)}, 2, "", ""},
		{"needs a new node", time.Hour, ptr.To[int32](2), []metav1.Condition{resolved, cond(cbv1beta1.ProvisioningCondition, metav1.ConditionFalse, "RequiresNewCapacity", 3)}, 0,
			v1alpha1.HeadroomReasonProvisioning, "Provisioning=False RequiresNewCapacity: RequiresNewCapacity message"},
		{"resolved for another count", time.Hour, ptr.To[int32](5), []metav1.Condition{resolved, cond(cbv1beta1.ProvisioningCondition, metav1.ConditionTrue, "FitsExistingCapacity", 3)}, 0,
			v1alpha1.HeadroomReasonProvisioning, "Provisioning=True FitsExistingCapacity"},
		{"provisioned for an older generation", time.Hour, ptr.To[int32](2), []metav1.Condition{resolved, cond(cbv1beta1.ProvisioningCondition, metav1.ConditionTrue, "FitsExistingCapacity", 2)}, 0,
			v1alpha1.HeadroomReasonProvisioning, "waiting for Karpenter's provisioner"},
		{"resolved for an older generation", time.Hour, ptr.To[int32](2), []metav1.Condition{cond(cbv1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, "Resolved", 2),
			cond(cbv1beta1.ProvisioningCondition, metav1.ConditionTrue, "FitsExistingCapacity", 2)}, 0, v1alpha1.HeadroomReasonProvisioning, "waiting for Karpenter to resolve"},
		{"the template is missing", time.Hour, nil, []metav1.Condition{cond(cbv1beta1.ReadyForProvisioningCondition, metav1.ConditionFalse, "PodTemplateNotFound", 3)}, 0,
			v1alpha1.HeadroomReasonProvisioning, "ReadyForProvisioning=False PodTemplateNotFound"},
		{"new and not yet resolved", time.Minute, nil, nil, 0, v1alpha1.HeadroomReasonProvisioning, "waiting for Karpenter to resolve"},
		{"never resolved in 2 minutes", 3 * time.Minute, nil, nil, 0, v1alpha1.HeadroomReasonNotObserved, "feature gate may be off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := &cbv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "h", Name: "b", Generation: 3, CreationTimestamp: metav1.NewTime(now.Add(-tc.age))},
				Status: cbv1beta1.CapacityBufferStatus{Replicas: tc.replicas, Conditions: tc.conditions}}
			ready, reason, message := bufferReady(cb, 2, now)
			if ready != tc.ready || reason != tc.reason || !strings.Contains(message, tc.message) {
				t.Errorf("ready %d reason %q message %q; want %d %q containing %q", ready, reason, message, tc.ready, tc.reason, tc.message)
			}
		})
	}
}

// TestRequeueForHeadroomWithoutItsPriorityClass: no watch announces the PriorityClass
// created, so a class reporting it missing comes back every minute; a ready one does not.
func TestRequeueForHeadroomWithoutItsPriorityClass(t *testing.T) {
	now := time.Date(2026, 12, 3, 4, 0, 0, 0, time.UTC)
	res := &render.Result{Headroom: &render.Headroom{Mechanism: v1alpha1.HeadroomPods, Desired: 2}}
	for reason, want := range map[string]time.Duration{
		v1alpha1.HeadroomReasonPriorityClassMissing: time.Minute,
		v1alpha1.HeadroomReasonReady:                0,
	} {
		wc := &v1alpha1.WorkloadClass{Status: v1alpha1.WorkloadClassStatus{Headroom: &v1alpha1.HeadroomStatus{Mechanism: v1alpha1.HeadroomPods, Desired: 2, Ready: 2, Reason: reason}}}
		if got := requeueForHeadroom(ctrl.Result{}, res, wc, now).RequeueAfter; got != want {
			t.Errorf("%s: requeue after %s, want %s", reason, got, want)
		}
	}
}
