package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// requeueForStaleness brings the class back when fresh signals go stale, or when signals
// dated a little ahead of this clock come due, so the condition and the weights change
// without another event.
func requeueForStaleness(res ctrl.Result, f signals.Freshness, now time.Time) ctrl.Result {
	for _, at := range []time.Time{f.StaleAt, f.FreshAt} {
		if at.IsZero() {
			continue
		}
		after := at.Sub(now) + time.Second
		if res.RequeueAfter == 0 || after < res.RequeueAfter {
			res.RequeueAfter = after
		}
	}
	return res
}

// classesForSignals re-renders every class when the signals change.
func (r *WorkloadClassReconciler) classesForSignals(ctx context.Context, _ client.Object) []reconcile.Request {
	return listRequests(ctx, r, &v1alpha1.WorkloadClassList{})
}
