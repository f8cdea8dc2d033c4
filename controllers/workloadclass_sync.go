package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/render"
)

// family is what the cluster holds of a class's children: only objects it controls.
type family struct {
	nodeClass *awsv1.EC2NodeClass
	nodePools map[string]*karpv1.NodePool
	overlays  map[string]*karpv1alpha1.NodeOverlay
}

// children reads the class's children from the cache, which holds only labelled ones.
func (r *WorkloadClassReconciler) children(ctx context.Context, wc *v1alpha1.WorkloadClass) (*family, error) {
	f := &family{overlays: map[string]*karpv1alpha1.NodeOverlay{}}
	owned := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: wc.Name}
	pools := &karpv1.NodePoolList{}
	if err := r.List(ctx, pools, owned); err != nil {
		return nil, fmt.Errorf("listing NodePools of WorkloadClass %s: %w", wc.Name, err)
	}
	f.nodePools = controlledBy(pools.Items, wc)
	if r.NodeOverlays {
		overlays := &karpv1alpha1.NodeOverlayList{}
		if err := r.List(ctx, overlays, owned); err != nil {
			return nil, fmt.Errorf("listing NodeOverlays of WorkloadClass %s: %w", wc.Name, err)
		}
		f.overlays = controlledBy(overlays.Items, wc)
	}
	nc := &awsv1.EC2NodeClass{}
	err := r.Get(ctx, client.ObjectKey{Name: wc.Name}, nc)
	switch {
	case err == nil && metav1.IsControlledBy(nc, wc):
		f.nodeClass = nc
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("getting EC2NodeClass %s: %w", wc.Name, err)
	}
	return f, nil
}

// usage is what each NodePool uses now (status.resources), for splitting the class limit.
func (f *family) usage() map[string]corev1.ResourceList {
	usage := map[string]corev1.ResourceList{}
	for name, np := range f.nodePools {
		usage[name] = np.Status.Resources
	}
	return usage
}

func (f *family) nodePoolNames() []string {
	return slices.Sorted(maps.Keys(f.nodePools))
}

// controlledBy keeps, by name, the listed objects whose controller is owner.
func controlledBy[T any, PT interface {
	*T
	client.Object
}](items []T, owner metav1.Object) map[string]PT {
	out := map[string]PT{}
	for i := range items {
		if o := PT(&items[i]); metav1.IsControlledBy(o, owner) {
			out[o.GetName()] = o
		}
	}
	return out
}

// ladder are the NodePools and NodeOverlays, by name: what must go before the EC2NodeClass.
func (f *family) ladder() []client.Object {
	var objs []client.Object
	for _, n := range f.nodePoolNames() {
		objs = append(objs, f.nodePools[n])
	}
	for _, n := range slices.Sorted(maps.Keys(f.overlays)) {
		objs = append(objs, f.overlays[n])
	}
	return objs
}

// objects are every child: the ladder, then the EC2NodeClass.
func (f *family) objects() []client.Object {
	objs := f.ladder()
	if f.nodeClass != nil {
		objs = append(objs, f.nodeClass)
	}
	return objs
}

// applyOutcome is what one pass of apply did.
type applyOutcome struct {
	conflicts []string // KIND/NAME of foreign objects in the way
	changed   bool     // some child was created or changed
	willDrift []string
	mayDrift  []string
}

func (o applyOutcome) conflictMessage() string {
	return fmt.Sprintf("%s already exist and are not owned by this class; they are left untouched (delete or rename them, or rename the class)", joinNames(o.conflicts))
}

func (o applyOutcome) driftNotice() string {
	var parts []string
	if len(o.willDrift) > 0 {
		parts = append(parts, joinNames(o.willDrift)+" will drift: Karpenter replaces their nodes")
	}
	if len(o.mayDrift) > 0 {
		parts = append(parts, joinNames(o.mayDrift)+" may drift if their selectors now resolve differently")
	}
	return strings.Join(parts, "; ")
}

// apply server-side applies the EC2NodeClass and then every NodePool. An object that
// already matches is not written. A foreign object in the way is never touched; if it is
// the EC2NodeClass, no NodePool is applied either, as they would launch nodes from it.
func (r *WorkloadClassReconciler) apply(ctx context.Context, wc *v1alpha1.WorkloadClass, res *render.Result, live *family) (applyOutcome, error) {
	var out applyOutcome
	var liveNC client.Object
	if live.nodeClass != nil {
		liveNC = live.nodeClass
	}
	ok, err := r.applyChild(ctx, wc, res.NodeClass, &awsv1.EC2NodeClass{}, liveNC, &out, func(want, have client.Object) diff.Drift {
		return diff.NodeClassDrift(want.(*awsv1.EC2NodeClass), have.(*awsv1.EC2NodeClass))
	})
	if err != nil || !ok {
		return out, err
	}
	for _, np := range res.NodePools {
		var liveNP client.Object
		if l, found := live.nodePools[np.Name]; found {
			if err := r.revive(ctx, wc, l, np); err != nil {
				return out, err
			}
			liveNP = l
		}
		if _, err := r.applyChild(ctx, wc, np, &karpv1.NodePool{}, liveNP, &out, func(want, have client.Object) diff.Drift {
			return diff.NodePoolDrift(want.(*karpv1.NodePool), have.(*karpv1.NodePool))
		}); err != nil {
			return out, err
		}
	}
	for _, ov := range res.NodeOverlays {
		var liveOV client.Object
		if l, found := live.overlays[ov.Name]; found {
			liveOV = l
		}
		// An overlay changes prices Karpenter sees, not what it hashes: no drift.
		if _, err := r.applyChild(ctx, wc, ov, &karpv1alpha1.NodeOverlay{}, liveOV, &out, func(client.Object, client.Object) diff.Drift { return diff.NoDrift }); err != nil {
			return out, err
		}
	}
	return out, nil
}

// applyChild applies one child; it returns false when a foreign object holds its name.
func (r *WorkloadClassReconciler) applyChild(ctx context.Context, wc *v1alpha1.WorkloadClass, want client.Object, empty client.Object, cached client.Object,
	out *applyOutcome, drift func(want, have client.Object) diff.Drift) (bool, error) {
	kind := want.GetObjectKind().GroupVersionKind().Kind
	ref := kind + "/" + want.GetName()
	have := cached
	if have == nil {
		// The cache holds only labelled children: ask the API server whether something else
		// already has this name before creating it.
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: want.GetName()}, empty)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("checking for an existing %s: %w", ref, err)
		case !metav1.IsControlledBy(empty, wc):
			out.conflicts = append(out.conflicts, ref)
			applies.WithLabelValues(kind, "conflict").Inc()
			r.event(wc, empty, "Warning", v1alpha1.ReasonOwnershipConflict, "Apply", "%s exists and is not owned by this class; left untouched", ref)
			return false, nil
		default:
			have = empty // ours, but its labels were removed: re-apply them
		}
	}

	doc, err := render.CleanJSON(want)
	if err != nil {
		return false, err
	}
	doc["metadata"].(map[string]any)["ownerReferences"] = []any{ownerReference(wc)}
	if have != nil {
		liveDoc, err := render.CleanJSON(have)
		if err != nil {
			return false, err
		}
		if len(diff.Changes(doc, liveDoc)) == 0 {
			applies.WithLabelValues(kind, "unchanged").Inc()
			return true, nil
		}
		switch drift(want, have) {
		case diff.WillDrift:
			out.willDrift = append(out.willDrift, ref)
			r.event(wc, have, "Normal", "Drift", "Apply", "applying %s changes what Karpenter hashes: it will replace the nodes launched from it", ref)
		case diff.MayDrift:
			out.mayDrift = append(out.mayDrift, ref)
			r.event(wc, have, "Normal", "Drift", "Apply", "applying %s changes its selectors: nodes drift if they now resolve differently", ref)
		}
	}
	u := &unstructured.Unstructured{Object: doc}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		applies.WithLabelValues(kind, "failed").Inc()
		r.event(wc, want, "Warning", v1alpha1.ReasonApplyFailed, "Apply", "applying %s: %v", ref, err)
		return false, fmt.Errorf("applying %s: %w", ref, err)
	}
	applies.WithLabelValues(kind, "applied").Inc()
	out.changed = true
	verb := "updated"
	if have == nil {
		verb = "created"
	}
	r.event(wc, want, "Normal", "Applied", "Apply", "%s %s", verb, ref)
	return true, nil
}

func ownerReference(wc *v1alpha1.WorkloadClass) map[string]any {
	return map[string]any{
		"apiVersion":         v1alpha1.GroupVersion.String(),
		"kind":               "WorkloadClass",
		"name":               wc.Name,
		"uid":                string(wc.UID),
		"controller":         true,
		"blockOwnerDeletion": true,
	}
}

// prune handles NodePools the class no longer renders, by prunePolicy. It returns the
// NodePools still being retired.
func (r *WorkloadClassReconciler) prune(ctx context.Context, wc *v1alpha1.WorkloadClass, res *render.Result, live *family) ([]*karpv1.NodePool, error) {
	desired := map[string]bool{}
	for _, np := range res.NodePools {
		desired[np.Name] = true
	}
	// Overlays hold no nodes: one no longer rendered is simply deleted.
	wanted := map[string]bool{}
	for _, ov := range res.NodeOverlays {
		wanted[ov.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(live.overlays)) {
		if !wanted[name] {
			if err := r.deleteChild(ctx, wc, live.overlays[name], "Pruned"); err != nil {
				return nil, err
			}
		}
	}
	var retiring []*karpv1.NodePool
	for _, name := range live.nodePoolNames() {
		if desired[name] {
			continue
		}
		np := live.nodePools[name]
		switch wc.Spec.PrunePolicy {
		case v1alpha1.PruneOrphan:
			if err := r.orphan(ctx, wc, np); err != nil {
				return nil, err
			}
		case v1alpha1.PruneRetire:
			done, err := r.retire(ctx, wc, np)
			if err != nil {
				return nil, err
			}
			if !done {
				retiring = append(retiring, np)
			}
		default:
			if err := r.deleteChild(ctx, wc, np, "Pruned"); err != nil {
				return nil, err
			}
		}
	}
	return retiring, nil
}

// retire sets a NodePool's limits to zero so no node launches, and deletes it once
// Karpenter reports it has no nodes. It returns true when the NodePool is deleted.
func (r *WorkloadClassReconciler) retire(ctx context.Context, wc *v1alpha1.WorkloadClass, np *karpv1.NodePool) (bool, error) {
	if np.Status.Nodes != nil && *np.Status.Nodes == 0 {
		return true, r.deleteChild(ctx, wc, np, "Pruned")
	}
	if isZero(np.Spec.Limits) {
		return false, nil
	}
	zero := karpv1.Limits{corev1.ResourceCPU: resource.MustParse("0")}
	for name := range np.Spec.Limits {
		zero[name] = resource.MustParse("0")
	}
	patch := client.MergeFrom(np.DeepCopy())
	np.Spec.Limits = zero
	metav1.SetMetaDataAnnotation(&np.ObjectMeta, v1alpha1.AnnotationRetired, "true")
	if err := r.Patch(ctx, np, patch); err != nil {
		return false, fmt.Errorf("retiring NodePool %s: %w", np.Name, err)
	}
	r.event(wc, np, "Normal", "Retiring", "Prune", "NodePool %s is no longer rendered: limits set to zero; it is deleted once it has no nodes", np.Name)
	return false, nil
}

// revive undoes a retirement when the class renders the NodePool again: the zero limits
// were written by a merge patch, outside server-side apply, so apply alone would not
// remove them.
func (r *WorkloadClassReconciler) revive(ctx context.Context, wc *v1alpha1.WorkloadClass, live, want *karpv1.NodePool) error {
	if _, retired := live.Annotations[v1alpha1.AnnotationRetired]; !retired {
		return nil
	}
	patch := client.MergeFrom(live.DeepCopy())
	delete(live.Annotations, v1alpha1.AnnotationRetired)
	live.Spec.Limits = want.Spec.Limits
	if err := r.Patch(ctx, live, patch); err != nil {
		return fmt.Errorf("reviving NodePool %s: %w", live.Name, err)
	}
	r.event(wc, live, "Normal", "Revived", "Apply", "NodePool %s is rendered again: its retirement is undone", live.Name)
	return nil
}

func isZero(limits karpv1.Limits) bool {
	cpu, ok := limits[corev1.ResourceCPU]
	if !ok || !cpu.IsZero() {
		return false
	}
	for _, q := range limits {
		if !q.IsZero() {
			return false
		}
	}
	return true
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
	r.event(wc, obj, "Normal", "Orphaned", "Prune", "%s %s released: no longer managed by Poolsmith", kindOf(obj), obj.GetName())
	return nil
}

func (r *WorkloadClassReconciler) deleteChild(ctx context.Context, wc *v1alpha1.WorkloadClass, obj client.Object, reason string) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.Delete(ctx, obj); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting %s %s: %w", kindOf(obj), obj.GetName(), err))
	}
	r.event(wc, obj, "Normal", reason, "Delete", "deleted %s %s", kindOf(obj), obj.GetName())
	return nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *karpv1.NodePool:
		return "NodePool"
	case *awsv1.EC2NodeClass:
		return "EC2NodeClass"
	case *karpv1alpha1.NodeOverlay:
		return "NodeOverlay"
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

func joinNames(names []string) string {
	return strings.Join(names, ", ")
}
