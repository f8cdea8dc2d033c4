package controllers

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/plan"
)

// cluster is where the reconciler reads children: the cache, and the API server for
// names the cache does not hold.
func (r *WorkloadClassReconciler) cluster() observe.Cluster {
	return observe.Cluster{Cached: r.Client, Direct: r.APIReader, NodeOverlays: r.NodeOverlays, Validator: r.Validator,
		NoAccessPolicies: r.NoAccessPolicies, NoDefaultPolicies: r.NoDefaultPolicies}
}

// execute carries out a validated plan: the EC2NodeClass, then the NodePools, then the
// overlays, then pruning. An update replaces the live object at the resourceVersion the
// plan was computed from, so a concurrent write fails it rather than being overwritten.
// On a failure part-way it names the children not yet written.
func (r *WorkloadClassReconciler) execute(ctx context.Context, wc *v1alpha1.WorkloadClass, p *plan.Plan) error {
	for _, s := range p.Steps {
		if s.Action == plan.Unchanged {
			applies.WithLabelValues(s.Kind, string(s.Action)).Inc()
		}
	}
	writes := p.Writes()
	for i, s := range writes {
		if err := r.write(ctx, wc, s); err != nil {
			applies.WithLabelValues(s.Kind, "failed").Inc()
			var rest []string
			for _, n := range writes[i+1:] {
				rest = append(rest, n.Ref())
			}
			msg := fmt.Sprintf("%s %s: %v", s.Action, s.Ref(), err)
			if len(rest) > 0 {
				msg += "; not yet written: " + joinNames(rest)
			}
			return fmt.Errorf("%s", msg)
		}
		applies.WithLabelValues(s.Kind, string(s.Action)).Inc()
	}
	return nil
}

// write sends one step and records its event.
func (r *WorkloadClassReconciler) write(ctx context.Context, wc *v1alpha1.WorkloadClass, s plan.Step) error {
	owner := client.FieldOwner(FieldManager)
	switch s.Action {
	case plan.Create:
		u := &unstructured.Unstructured{Object: s.Object}
		if err := r.Create(ctx, u, owner); err != nil {
			return err
		}
		r.event(wc, u, "Normal", "Applied", "Apply", "created %s", s.Ref())
	case plan.Delete:
		if err := r.Delete(ctx, s.LiveObject, client.Preconditions{UID: ptr.To(s.LiveObject.GetUID())}); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.event(wc, s.LiveObject, "Normal", "Pruned", "Delete", "deleted %s", s.Ref())
	default:
		u := &unstructured.Unstructured{Object: s.Object}
		if err := r.Update(ctx, u, owner); err != nil {
			if apierrors.IsNotFound(err) && s.Action == plan.Orphan {
				return nil
			}
			return err
		}
		r.updateEvent(wc, u, s)
	}
	return nil
}

func (r *WorkloadClassReconciler) updateEvent(wc *v1alpha1.WorkloadClass, obj client.Object, s plan.Step) {
	switch s.Action {
	case plan.Retire:
		r.event(wc, obj, "Normal", "Retiring", "Prune", "%s is no longer rendered: limits set to zero; it is deleted once it has no nodes", s.Ref())
	case plan.Orphan:
		r.event(wc, obj, "Normal", "Orphaned", "Prune", "%s released: no longer managed by Poolsmith", s.Ref())
	case plan.Revive:
		r.event(wc, obj, "Normal", "Revived", "Apply", "%s is rendered again: its retirement is undone", s.Ref())
	default:
		r.event(wc, obj, "Normal", "Applied", "Apply", "updated %s (%s)", s.Ref(), changedPaths(s))
	}
	switch s.Drift {
	case diff.WillDrift:
		r.event(wc, obj, "Normal", "Drift", "Apply", "%s changed what Karpenter hashes: it will replace the nodes launched from it", s.Ref())
	case diff.MayDrift:
		r.event(wc, obj, "Normal", "Drift", "Apply", "%s changed its selectors: nodes drift if they now resolve differently", s.Ref())
	}
}

// changedPaths names the fields an update set and removed, for its event.
func changedPaths(s plan.Step) string {
	var paths []string
	for _, c := range s.Changes {
		paths = append(paths, c.Path)
	}
	for _, c := range s.Removed {
		paths = append(paths, "-"+c.Path)
	}
	const most = 5
	if len(paths) > most {
		paths = append(paths[:most], fmt.Sprintf("and %d more", len(paths)-most))
	}
	return strings.Join(paths, ", ")
}

func conflictMessage(conflicts []string) string {
	return fmt.Sprintf("%s already exist and are not owned by this class; they are left untouched and nothing of the class is written until they are gone (delete or rename them, or rename the class)", joinNames(conflicts))
}

// orphan removes Poolsmith's owner reference and labels, so the object leaves the cache
// and is no longer managed.
func (r *WorkloadClassReconciler) orphan(ctx context.Context, wc *v1alpha1.WorkloadClass, obj client.Object) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	labels := obj.GetLabels()
	delete(labels, v1alpha1.LabelManagedBy)
	delete(labels, v1alpha1.LabelClass)
	obj.SetLabels(labels)
	var refs []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != wc.UID {
			refs = append(refs, ref)
		}
	}
	obj.SetOwnerReferences(refs)
	if err := r.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("orphaning %s: %w", obj.GetName(), err))
	}
	r.event(wc, obj, "Normal", "Orphaned", "Delete", "%s %s released: no longer managed by Poolsmith", plan.KindOf(obj), obj.GetName())
	return nil
}

func (r *WorkloadClassReconciler) deleteChild(ctx context.Context, wc *v1alpha1.WorkloadClass, obj client.Object) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.Delete(ctx, obj); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting %s %s: %w", plan.KindOf(obj), obj.GetName(), err))
	}
	r.event(wc, obj, "Normal", "Deleting", "Delete", "deleted %s %s", plan.KindOf(obj), obj.GetName())
	return nil
}

func joinNames(names []string) string {
	return strings.Join(names, ", ")
}
