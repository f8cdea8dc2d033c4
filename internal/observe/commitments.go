package observe

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// Tracking asks Assemble to track a class's commitments as the manager does: its
// entitlements from the Baseline's classes, its coverage from its NodeClaims, and each
// commitment's state from that coverage and the class's previous status.commitments.
type Tracking struct {
	// Now is the time states change at.
	Now time.Time
	// Dwell is how long two nodes of room must hold before an Exhausted commitment is Open
	// again (the manager's --commitment-open-dwell); commitment.DefaultOpenDwell when 0.
	Dwell time.Duration
	// LedgerOnly stops at the coverage (cost's input): no states, no render.
	LedgerOnly bool
}

// Coverage is what Assemble found of a class's commitments: the render's input
// (Options.Commitments) and what status.commitments, CommitmentsCurrent, the metrics and
// cost report.
type Coverage struct {
	// Declared are the Baseline's commitments that still run; LeftOut the entries priced
	// with nothing (expired, without facts), the field named.
	Declared []commitment.Commitment
	LeftOut  []commitment.Problem
	// Ignore: the class sets spec.weighting.commitments: Ignore.
	Ignore bool
	// Entitlements are the class's part of each commitment by id, in its unit; Rules say
	// how that part was split (allocations, or equally per team).
	Entitlements map[string]float64
	Rule         string
	// Nodes are the class's priced NodeClaims; Ledger what Allocate found of them against
	// the entitlements.
	Nodes  []commitment.Node
	Ledger commitment.Ledger
	// NodeDraw is what one node of the class draws from each commitment (the hysteresis's
	// node, render.CommitmentNodes).
	NodeDraw map[string]float64
	// States are each commitment's state after this pass; Previous the ones status held.
	States   map[string]commitment.State
	Previous map[string]commitment.State
}

// Flipped are the commitments whose state this pass changed (Open to Exhausted or back),
// in declaration order.
func (c *Coverage) Flipped() []commitment.Commitment {
	var out []commitment.Commitment
	for _, d := range c.Declared {
		prev, had := c.Previous[d.ID]
		if now, ok := c.States[d.ID]; ok && had && now.Open != prev.Open {
			out = append(out, d)
		}
	}
	return out
}

// coverage tracks wc's commitments (see Tracking) and sets in's render options from it.
func (s Source) coverage(ctx context.Context, in *Inputs, cat *catalog.Catalog) error {
	t := *s.Tracking
	if t.Dwell == 0 {
		t.Dwell = commitment.DefaultOpenDwell
	}
	wc, b := in.Class, in.Baseline
	cov := &Coverage{Previous: StatesOf(wc.Status.Commitments), States: map[string]commitment.State{}, Entitlements: map[string]float64{}}
	cov.Declared, cov.LeftOut = commitment.Resolve(b.Spec.Commitments, in.Options.Commitments.Export, t.Now)
	cov.Ignore = wc.Spec.Weighting != nil && wc.Spec.Weighting.Commitments == v1alpha1.CommitmentsIgnore
	in.Coverage = cov
	if cat == nil {
		var err error
		if cat, err = catalog.Load(); err != nil {
			return err
		}
	}
	region := in.Options.Region
	if region == "" {
		region = catalog.DefaultRegion
	}
	classes, err := baselineClasses(ctx, s.Reader, b.Name)
	if err != nil {
		return err
	}
	frac := commitment.Entitlements(b.Spec.Commitments.Allocations, classes)[wc.Name]
	cov.Rule = frac.Rule
	for _, c := range cov.Declared {
		cov.Entitlements[c.ID] = frac.Of * c.Share
	}
	if cov.Nodes, err = classNodes(ctx, s.Reader, wc.Name, cat, region); err != nil {
		return err
	}
	cov.Ledger = commitment.Allocate(cov.Nodes, cov.Declared, region, cov.Entitlements)
	// The export stays as Assemble read it.
	opts := &in.Options.Commitments
	opts.Now, opts.Offline, opts.Entitlements, opts.States = t.Now, false, cov.Entitlements, map[string]commitment.State{}
	in.Options.Catalog, in.Options.Region = cat, region
	if cov.Ignore || t.LedgerOnly {
		return nil
	}
	if cov.NodeDraw, err = render.CommitmentNodes(in.Inputs); err != nil {
		// The render reports the same error on the class; without a node nothing ranks.
		cov.NodeDraw = nil
	}
	for _, c := range cov.Declared {
		node, ok := cov.NodeDraw[c.ID]
		if !ok {
			continue // it prices none of the class's rungs
		}
		var prev *commitment.State
		if p, ok := cov.Previous[c.ID]; ok {
			prev = &p
		}
		st := commitment.Next(prev, cov.Ledger.Room(c, cov.Entitlements[c.ID]), node, t.Now, t.Dwell)
		cov.States[c.ID] = st
		in.Options.Commitments.States[c.ID] = st
	}
	return nil
}

// StatesOf reads the commitment states a class's status holds, by id.
func StatesOf(status []v1alpha1.ClassCommitmentStatus) map[string]commitment.State {
	out := map[string]commitment.State{}
	for _, s := range status {
		if s.State != v1alpha1.CommitmentOpen && s.State != v1alpha1.CommitmentExhausted {
			continue
		}
		st := commitment.State{Open: s.State == v1alpha1.CommitmentOpen}
		if s.Since != nil {
			st.Since = s.Since.Time
		}
		if s.OpenPendingSince != nil {
			st.OpenPendingSince = s.OpenPendingSince.Time
		}
		out[s.ID] = st
	}
	return out
}

// BaselineIndex is the field index of WorkloadClasses by the name of the Baseline they
// use, which the manager's cache registers.
const BaselineIndex = "spec.baselineRef.name"

// baselineClasses are the classes that use the Baseline, as Entitlements needs them: by
// the cache's index, else (a client without it) from the list of every class.
func baselineClasses(ctx context.Context, r client.Reader, baseline string) ([]commitment.Class, error) {
	list := &v1alpha1.WorkloadClassList{}
	if err := r.List(ctx, list, client.MatchingFields{BaselineIndex: baseline}); err != nil {
		if err := r.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing the WorkloadClasses of Baseline %s: %w", baseline, err)
		}
	}
	var out []commitment.Class
	for i := range list.Items {
		wc := &list.Items[i]
		if wc.BaselineName() != baseline {
			continue
		}
		out = append(out, CommitmentClass(wc))
	}
	return out, nil
}

// CommitmentClass is what commitment.Entitlements needs of a class: its name, labels and
// whether it ignores commitments.
func CommitmentClass(wc *v1alpha1.WorkloadClass) commitment.Class {
	return commitment.Class{Name: wc.Name, Labels: wc.Labels,
		Ignore: wc.Spec.Weighting != nil && wc.Spec.Weighting.Commitments == v1alpha1.CommitmentsIgnore}
}

// classNodes are the class's launched NodeClaims (an instance type the catalog knows),
// priced at on-demand in region, in name order.
func classNodes(ctx context.Context, r client.Reader, class string, cat *catalog.Catalog, region string) ([]commitment.Node, error) {
	claims := &karpv1.NodeClaimList{}
	if err := r.List(ctx, claims, client.MatchingLabels{v1alpha1.LabelClass: class}); err != nil {
		return nil, fmt.Errorf("listing NodeClaims of WorkloadClass %s: %w", class, err)
	}
	return CommitmentNodes(claims.Items, cat, region), nil
}

// CommitmentNodes are the NodeClaims that a commitment could cover: launched (an instance
// type the catalog prices in region), with their zone and capacity type.
func CommitmentNodes(claims []karpv1.NodeClaim, cat *catalog.Catalog, region string) []commitment.Node {
	var out []commitment.Node
	for i := range claims {
		nc := &claims[i]
		ty := cat.Types[nc.Labels[corev1.LabelInstanceTypeStable]]
		p, priced := cat.Prices[region][nc.Labels[corev1.LabelInstanceTypeStable]]
		if ty == nil || !priced {
			continue
		}
		out = append(out, commitment.Node{Name: nc.Name, Type: ty, Zone: nc.Labels[corev1.LabelTopologyZone],
			CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey], OnDemand: p.OnDemand})
	}
	return out
}

// CostInput adds the coverage to what cost prices the class from: its ledger and the
// entitlement its nodes leave unused. cat and region are the ones the coverage was
// computed with.
func (c *Coverage) CostInput(in cost.Input) cost.Input {
	if c == nil {
		return in
	}
	in.Coverage = &c.Ledger
	in.UnusedEntitlement = c.Ledger.Unused(c.Declared, c.Entitlements, in.Catalog, in.Region)
	return in
}

// Exports reads the signals ConfigMap's commitments.json; *signals.Provider does.
type Exports interface {
	Commitments(ctx context.Context, c client.Reader) (*signals.CommitmentFacts, error, error)
}

// ReadExport reads the export as Resolve takes it: an export that cannot be read is
// carried in Export.Err (the entries that need it are left out, nothing stalls); only a
// failure to read the ConfigMap is an error.
func ReadExport(ctx context.Context, e Exports, c client.Reader) (commitment.Export, error) {
	facts, invalid, err := e.Commitments(ctx, c)
	if err != nil {
		return commitment.Export{}, err
	}
	return commitment.Export{Facts: facts, Err: invalid}, nil
}
