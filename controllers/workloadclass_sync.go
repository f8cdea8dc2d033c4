package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
)

// source is where the reconciler reads a class's inputs (observe.Source.Assemble): the
// Baseline from the cache, the catalog priced by the signals, the capabilities.
func (r *WorkloadClassReconciler) source() observe.Source {
	return observe.Source{Reader: r.Client, Pricing: r.Signals, Exports: r.Signals, Usage: r.Usage,
		Options:  render.Options{Region: r.Signals.Region, Capabilities: r.Capabilities},
		Tracking: &observe.Tracking{Now: r.Signals.Clock(), Dwell: r.CommitmentOpenDwell}}
}

// cluster is where the reconciler reads children for wc: the cache, and the API server
// for names the cache does not hold. A plan that only creates asks nothing first (see
// observe.Cluster.Lazy), unless the class already met a taken name: then its names are
// checked by reads, so waiting for the name creates and rolls back nothing.
func (r *WorkloadClassReconciler) cluster(wc *v1alpha1.WorkloadClass) observe.Cluster {
	c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
	// The status the cache holds may trail a conflict the last pass met: remember it too.
	// A conflict met on an older generation is not this one's.
	_, met := r.taken.Load(wc.UID)
	conflicted := met || (c != nil && c.ObservedGeneration == wc.Generation && c.Reason == v1alpha1.ReasonOwnershipConflict)
	return observe.Cluster{Cached: r.Client, Direct: r.APIReader, Validator: r.Validator, Lazy: !conflicted, Memo: &r.memo,
		Capabilities: r.Capabilities, ClassIndexed: r.ClassIndexed}
}

// execute carries out a validated plan in its waves (plan.Waves): the EC2NodeClass, then
// the rest of the family at once, then pruning, each wave once the one before it is
// written. The writes of a wave go out together: a new class's family is two round trips
// of the API server, not one per child, one after the other. An update replaces the live
// object at the resourceVersion the plan was computed from, so a concurrent write fails it
// rather than being overwritten. A failure stops the pass after its wave, naming what
// failed and the children not yet written. A plan that only creates asked the API server
// nothing first: if a create meets a name the class does not control, the children this
// pass created are deleted again, so the family is written whole or not at all, and the
// conflict is returned. edit is the Baseline when the pass carries its edit
// (baselineEdit): updates are then announced on the Baseline, once for the whole fan-out,
// not on the class.
func (r *WorkloadClassReconciler) execute(ctx context.Context, wc *v1alpha1.WorkloadClass, p *plan.Plan, edit *v1alpha1.Baseline) error {
	for _, s := range p.Steps {
		if s.Action == plan.Unchanged {
			applies.WithLabelValues(s.Kind, string(s.Action)).Inc()
		}
	}
	waves := p.Waves()
	var created []client.Object
	for w, wave := range waves {
		results := r.writeWave(ctx, wc, wave, edit)
		var taken error
		var failed []string
		var first error
		for i, s := range wave {
			res := results[i]
			switch {
			case res.err == nil:
				if s.Action == plan.Create && res.obj != nil {
					created = append(created, res.obj)
				}
				applies.WithLabelValues(s.Kind, string(s.Action)).Inc()
			case errors.As(res.err, new(*nameTaken)):
				applies.WithLabelValues(s.Kind, "conflict").Inc()
				if taken == nil {
					taken = res.err
				}
			default:
				applies.WithLabelValues(s.Kind, "failed").Inc()
				failed = append(failed, fmt.Sprintf("%s %s: %v", s.Action, s.Ref(), res.err))
				if first == nil {
					first = res.err
				}
			}
		}
		if taken != nil {
			r.rollBack(ctx, wc, created)
			return taken
		}
		if first != nil {
			var rest []string
			for _, later := range waves[w+1:] {
				for _, s := range later {
					rest = append(rest, s.Ref())
				}
			}
			msg := strings.Join(failed, "; ")
			if len(rest) > 0 {
				msg += "; not yet written: " + joinNames(rest)
			}
			return &applyError{msg: msg, err: first}
		}
	}
	if len(created) > 0 && wc.Status.ObservedGeneration > 0 {
		// One event for the pass's creates, not one per child, and none for a class's first
		// family: its Synced condition names what was created, and a new class costs one
		// request per child, the finalizer and one status write.
		var refs []string
		for _, obj := range created {
			refs = append(refs, plan.KindOf(obj)+"/"+obj.GetName())
		}
		r.event(wc, nil, "Normal", "Applied", "Apply", "created %s", joinNames(refs))
	}
	return nil
}

// waveWrites bounds the writes one class has in flight, so that the workers together stay
// well below the API server's default limit of 200 mutating requests in flight.
const waveWrites = 8

// written is one write's result: the object a create made, or the error.
type written struct {
	obj client.Object
	err error
}

// writeWave sends a wave's writes together, at most waveWrites at a time, and returns
// each one's result in the wave's order once all are done.
func (r *WorkloadClassReconciler) writeWave(ctx context.Context, wc *v1alpha1.WorkloadClass, wave []plan.Step, edit *v1alpha1.Baseline) []written {
	results := make([]written, len(wave))
	if len(wave) == 1 {
		results[0].obj, results[0].err = r.write(ctx, wc, wave[0], edit)
		return results
	}
	slots := make(chan struct{}, waveWrites)
	var wg sync.WaitGroup
	for i, s := range wave {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			results[i].obj, results[i].err = r.write(ctx, wc, s, edit)
		})
	}
	wg.Wait()
	return results
}

// applyError names the step that failed and the children not yet written; it unwraps to
// the API server's error.
type applyError struct {
	msg string
	err error
}

func (e *applyError) Error() string { return e.msg }
func (e *applyError) Unwrap() error { return e.err }

// rollBack deletes the children a pass created before it met a taken name. They are
// seconds old; Karpenter batches pending pods for longer than that before it launches.
func (r *WorkloadClassReconciler) rollBack(ctx context.Context, wc *v1alpha1.WorkloadClass, created []client.Object) {
	for i := len(created) - 1; i >= 0; i-- {
		obj := created[i]
		if err := r.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil {
			if !apierrors.IsNotFound(err) {
				log.FromContext(ctx).Error(err, "rolling back a create", "object", obj.GetName())
			}
			continue
		}
		r.ownWrites.Delete(plan.KindOf(obj) + "/" + obj.GetName())
		r.event(wc, obj, "Normal", "RolledBack", "Apply", "deleted %s %s again: a name of the family is taken, so none of it is written", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
}

// rollBackUnfinished deletes what earlier passes left of a blocked class that has never
// completed one (status.observedGeneration 0): all of it comes from a pass that died
// between its creates and their rollback (a SIGKILL, a lost leader), so the family is
// written whole or not at all across restarts too. A class that has synced keeps its
// children: a conflict never prunes what was once applied.
func (r *WorkloadClassReconciler) rollBackUnfinished(ctx context.Context, wc *v1alpha1.WorkloadClass, live plan.Children) {
	if wc.Status.ObservedGeneration != 0 {
		return
	}
	// rollBack deletes from the end: the NodePools and overlays before the EC2NodeClass.
	var left []client.Object
	if live.NodeClass != nil && live.NodeClass.DeletionTimestamp.IsZero() {
		left = append(left, live.NodeClass)
	}
	// The placeholders last, so deleted first: they hold no nodes, but pinned to a rung
	// that goes they would wait Pending for ever.
	for _, obj := range append(live.Ladder(), live.HeadroomObjects()...) {
		if obj.GetDeletionTimestamp().IsZero() {
			left = append(left, obj)
		}
	}
	r.rollBack(ctx, wc, left)
}

// write sends one step and records its event (execute records the creates of a pass in
// one, and a Baseline edit's updates go into its one event); for a create it returns the
// object created (nil when the class's own object already held the name).
func (r *WorkloadClassReconciler) write(ctx context.Context, wc *v1alpha1.WorkloadClass, s plan.Step, edit *v1alpha1.Baseline) (client.Object, error) {
	owner := client.FieldOwner(FieldManager)
	switch s.Action {
	case plan.Create:
		u := &unstructured.Unstructured{Object: s.Object}
		if err := r.Create(ctx, u, owner); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil, r.ownershipCheck(ctx, wc, u, s)
			}
			return nil, err
		}
		r.ownWrites.Store(s.Ref(), ownWrite{resourceVersion: u.GetResourceVersion(), created: time.Now()})
		return u, nil
	case plan.Delete:
		if err := r.Delete(ctx, s.LiveObject, client.Preconditions{UID: ptr.To(s.LiveObject.GetUID())}); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		r.ownWrites.Delete(s.Ref())
		r.event(wc, s.LiveObject, "Normal", "Pruned", "Delete", "deleted %s", s.Ref())
	default:
		u := &unstructured.Unstructured{Object: s.Object}
		if err := r.Update(ctx, u, owner); err != nil {
			if apierrors.IsNotFound(err) && s.Action == plan.Orphan {
				return nil, nil
			}
			return nil, err
		}
		r.ownWrites.Store(s.Ref(), ownWrite{resourceVersion: u.GetResourceVersion()})
		if edit != nil && s.Action == plan.Update {
			r.fanOut.add(r.Recorder, edit, wc.Name, s)
			break
		}
		r.updateEvent(wc, u, s)
	}
	return nil, nil
}

// nameTaken is a create that met an object the class does not control.
type nameTaken struct{ ref string }

func (e *nameTaken) Error() string { return e.ref + " exists and is not controlled by this class" }

// ownershipCheck reads, once, the object a create met: the class's own (the cache had
// not caught up) is fine; any other object is a conflict.
func (r *WorkloadClassReconciler) ownershipCheck(ctx context.Context, wc *v1alpha1.WorkloadClass, want *unstructured.Unstructured, s plan.Step) error {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(want.GroupVersionKind())
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), existing); err != nil {
		return fmt.Errorf("reading the existing %s: %w", s.Ref(), err)
	}
	if !metav1.IsControlledBy(existing, wc) {
		return &nameTaken{ref: s.Ref()}
	}
	return nil
}

func (r *WorkloadClassReconciler) updateEvent(wc *v1alpha1.WorkloadClass, obj client.Object, s plan.Step) {
	// One event per written child; an update that drifts nodes is a Drift event instead of
	// an Applied one.
	drift := ""
	switch s.Drift {
	case diff.WillDrift:
		drift = ": it changed what Karpenter hashes, so Karpenter will replace the nodes launched from it"
	case diff.MayDrift:
		drift = ": it changed its selectors, so nodes drift if they now resolve differently"
	}
	switch {
	case s.Action == plan.Retire:
		r.event(wc, obj, "Normal", "Retiring", "Prune", "%s is no longer rendered: limits set to zero; it is deleted once it has no nodes", s.Ref())
	case s.Action == plan.Orphan:
		r.event(wc, obj, "Normal", "Orphaned", "Prune", "%s released: no longer managed by Poolsmith", s.Ref())
	case s.Action == plan.Revive:
		r.event(wc, obj, "Normal", "Revived", "Apply", "%s is rendered again: its retirement is undone%s", s.Ref(), drift)
	case drift != "":
		r.event(wc, obj, "Normal", "Drift", "Apply", "updated %s (%s)%s", s.Ref(), changedPaths(s), drift)
	default:
		r.event(wc, obj, "Normal", "Applied", "Apply", "updated %s (%s)", s.Ref(), changedPaths(s))
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
	var refs []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != wc.UID {
			refs = append(refs, ref)
		}
	}
	setLabelsAndOwners(obj, labels, refs)
	if err := r.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("orphaning %s: %w", obj.GetName(), err))
	}
	r.event(wc, obj, "Normal", "Orphaned", "Delete", "%s %s released: no longer managed by Poolsmith", plan.KindOf(obj), obj.GetName())
	return nil
}

// setLabelsAndOwners sets obj's labels and owner references through its concrete
// ObjectMeta (an unstructured object's through its own methods) rather than through
// client.Object: SetLabels and SetOwnerReferences called through the interface kept those
// methods of every API type in the binary alive (about 195 wrappers each, 80 KB of the
// binary apiece), nothing else calling them.
func setLabelsAndOwners(obj client.Object, labels map[string]string, refs []metav1.OwnerReference) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetLabels(labels)
		u.SetOwnerReferences(refs)
		return
	}
	om := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
	om.SetLabels(labels)
	om.SetOwnerReferences(refs)
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
