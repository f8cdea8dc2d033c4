package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/observe"
)

// commitmentsMinWrite is the least time between two writes of a Baseline's
// status.commitments when only the figures moved (a change of the condition, which
// follows its spec, is written at once): the pooled figure moves with every node of every
// class. A variable so that the suite need not wait a minute.
var commitmentsMinWrite = time.Minute

// baselineCommitments is what a Baseline's status should say of its commitments.
type baselineCommitments struct {
	status    []v1alpha1.BaselineCommitmentStatus
	condition *metav1.Condition // nil: none (the Baseline declares no commitments)
}

// commitments computes the Baseline's pooled coverage (every class's nodes against this
// cluster's share, in AWS's order) and sets its gauges. It returns what to write, nil
// when nothing is due, and how long until a held figure or an expiry is due.
func (r *BaselineReconciler) commitments(ctx context.Context, b *v1alpha1.Baseline, classes []v1alpha1.WorkloadClass) (*baselineCommitments, time.Duration, error) {
	now := r.now()
	if b.Spec.Commitments == nil {
		forgetBaselineCommitments(b.Name)
		if len(b.Status.Commitments) == 0 && meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionCommitmentsCurrent) == nil {
			return nil, 0, nil
		}
		return &baselineCommitments{}, 0, nil
	}
	cat, region, err := r.catalog(ctx)
	if err != nil {
		return nil, 0, err
	}
	export, err := r.export(ctx)
	if err != nil {
		return nil, 0, err
	}
	declared, leftOut := commitment.Resolve(b.Spec.Commitments, export, now)
	names := sets.New[string]()
	for _, wc := range classes {
		names.Insert(wc.Name)
	}
	claims := &karpv1.NodeClaimList{}
	if err := r.List(ctx, claims, client.HasLabels{v1alpha1.LabelClass}); err != nil {
		return nil, 0, fmt.Errorf("listing NodeClaims of Baseline %s's classes: %w", b.Name, err)
	}
	var mine []karpv1.NodeClaim
	for _, nc := range claims.Items {
		if names.Has(nc.Labels[v1alpha1.LabelClass]) {
			mine = append(mine, nc)
		}
	}
	share := map[string]float64{}
	for _, c := range declared {
		share[c.ID] = c.Share
	}
	ledger := commitment.Allocate(observe.CommitmentNodes(mine, cat, region), declared, region, share)
	out := &baselineCommitments{}
	forgetBaselineCommitments(b.Name)
	var wait time.Duration
	seen := sets.New[string]()
	for _, c := range declared {
		used := ledger.Used[c.ID]
		s := v1alpha1.BaselineCommitmentStatus{ID: c.ID, Kind: kindOf(c), Share: amountOf(c, c.Share), Used: amountOf(c, used), UsedRatio: ratio(used, c.Share),
			Nodes: coveredNodes(ledger, c.ID)}
		if c.End != nil {
			s.End = &metav1.Time{Time: c.End.UTC()}
			commitmentEnd.WithLabelValues(b.Name, c.ID).Set(float64(c.End.Unix()))
			wait = sooner(wait, c.End.Sub(now)+time.Second)
		}
		commitmentUsed.WithLabelValues(b.Name, c.ID, "").Set(min(used/c.Share, 1))
		seen.Insert(c.ID)
		out.status = append(out.status, s)
	}
	for _, p := range leftOut {
		if seen.Has(p.ID) {
			continue
		}
		seen.Insert(p.ID)
		kind := v1alpha1.CommitmentKindSavingsPlan
		if strings.HasPrefix(p.Field, "spec.commitments.reservedInstances") {
			kind = v1alpha1.CommitmentKindReservedInstance
		}
		out.status = append(out.status, v1alpha1.BaselineCommitmentStatus{ID: p.ID, Kind: kind, LeftOut: p.Message})
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionCommitmentsCurrent, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCommitmentsCurrent,
		Message: fmt.Sprintf("every commitment is in use (%d)", len(declared)), ObservedGeneration: b.Generation}
	if len(leftOut) > 0 {
		msgs := make([]string, len(leftOut))
		for i, p := range leftOut {
			msgs[i] = p.Message
		}
		cond.Status, cond.Reason = metav1.ConditionFalse, leftOut[0].Reason
		cond.Message = "left out, the classes render without them: " + strings.Join(msgs, "; ")
	}
	out.condition = &cond
	prev := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionCommitmentsCurrent)
	conditionChanged := prev == nil || prev.Status != cond.Status || prev.Reason != cond.Reason || prev.Message != cond.Message || prev.ObservedGeneration != cond.ObservedGeneration
	if !conditionChanged && equality.Semantic.DeepEqual(b.Status.Commitments, out.status) {
		return nil, wait, nil
	}
	if !conditionChanged {
		if last, ok := r.commitmentsWritten.Load(b.Name); ok {
			if held := commitmentsMinWrite - now.Sub(last.(time.Time)); held > 0 {
				return nil, sooner(wait, held), nil
			}
		}
	}
	return out, wait, nil
}

// apply sets the Baseline's status from c.
func (c *baselineCommitments) apply(b *v1alpha1.Baseline) {
	b.Status.Commitments = c.status
	if c.condition == nil {
		meta.RemoveStatusCondition(&b.Status.Conditions, v1alpha1.ConditionCommitmentsCurrent)
		return
	}
	meta.SetStatusCondition(&b.Status.Conditions, *c.condition)
}

// catalog is the priced catalog and region classes are priced with.
func (r *BaselineReconciler) catalog(ctx context.Context) (*catalog.Catalog, string, error) {
	if r.Signals == nil {
		cat, err := catalog.Load()
		return cat, catalog.DefaultRegion, err
	}
	cat, _, err := r.Signals.Catalog(ctx, r.Client)
	region := r.Signals.Region
	if region == "" {
		region = catalog.DefaultRegion
	}
	return cat, region, err
}

// export is the signals ConfigMap's commitments.json, as the classes resolve with it.
func (r *BaselineReconciler) export(ctx context.Context) (commitment.Export, error) {
	if r.Signals == nil {
		return commitment.Export{}, nil
	}
	return observe.ReadExport(ctx, r.Signals, r.Client)
}

func coveredNodes(l commitment.Ledger, id string) int32 {
	n := int32(0)
	for _, ids := range l.By {
		for _, covering := range ids {
			if covering == id {
				n++
			}
		}
	}
	return n
}

// sooner is the shorter of two waits, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case b <= 0:
		return a
	case a <= 0 || b < a:
		return b
	}
	return a
}

// baselineOfNodeClaim is the Baseline of a NodeClaim's class, when it declares
// commitments: its pooled coverage moves with the node.
func (r *BaselineReconciler) baselineOfNodeClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	if _, b := classAndBaseline(ctx, r, obj); b != nil && b.Spec.Commitments != nil {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: b.Name}}}
	}
	return nil
}
