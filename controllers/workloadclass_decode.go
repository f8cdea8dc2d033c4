package controllers

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/decode"
)

// undecodable handles a class whose stored spec does not fit its Go type (internal/decode):
// it reports Synced=False InvalidSpec with why, and leaves its children exactly as they
// are. Only its status is written, never the class itself, since the copy in hand lacks
// the fields that did not decode. Deleting it finalizes as usual when its prunePolicy
// decoded, and waits for a fix when that is the field in doubt.
func (r *WorkloadClassReconciler) undecodable(ctx context.Context, wc *v1alpha1.WorkloadClass, why string) (ctrl.Result, error) {
	if !wc.DeletionTimestamp.IsZero() && !decode.Failed(wc, "prunePolicy") {
		r.written.Delete(wc.UID)
		return r.finalize(ctx, wc)
	}
	original := wc.DeepCopy()
	msg := fmt.Sprintf("the stored spec does not decode (%s): fix the field; existing children are left as they are until then", why)
	err := reconcile.TerminalError(errors.New(msg))
	r.report(wc, outcome{Failure: &failure{Reason: v1alpha1.ReasonInvalidSpec, Message: msg}}, err)
	countError(wc, err)
	if serr := r.writeStatus(ctx, original, wc); serr != nil {
		return ctrl.Result{}, errors.Join(err, serr)
	}
	return ctrl.Result{}, err
}

// releaseFinalizer writes wc's finalizers: by update, or for a class that did not decode
// whole (whose other fields must not be written back) by a patch of its metadata at the
// version read.
func (r *WorkloadClassReconciler) releaseFinalizer(ctx context.Context, original, wc *v1alpha1.WorkloadClass) error {
	if decode.Error(wc) == "" {
		return r.Update(ctx, wc)
	}
	return r.Patch(ctx, wc, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
}
