package render

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
)

// CommitmentOptions are what only the cluster knows of a class's commitments.
type CommitmentOptions struct {
	// Now decides which commitments have ended; zero: the wall clock.
	Now time.Time
	// Offline: no nodes are known (the CLI's render, explain and lint), so a commitment
	// without a state is Open, with its full entitlement.
	Offline bool
	// States are the class's commitment states by id (commitment.Next, from its nodes and
	// its previous status, observe's Tracking). Without Offline, a commitment without a
	// state ranks nothing: it prices none of the class's rungs, or no coverage is known (the
	// rebalance order), and an Open state nothing could exhaust would send every launch to
	// the covered rungs, whatever the commitment's size.
	States map[string]commitment.State
	// Entitlements are the class's part of each commitment by id ($/h of a Savings Plan,
	// normalized units of a Reserved Instance), for the reasons; unknown when absent.
	Entitlements map[string]float64
	// Export is the signals' commitments.json, read by the caller (the CLI's --signals or
	// --commitments, the manager's signals ConfigMap): the facts an entry of the Baseline
	// leaves out, by id. The zero Export is none.
	Export commitment.Export
}

// Commitments are the Baseline's commitments as they apply to one class.
type Commitments struct {
	// Use is the class's spec.weighting.commitments, Use by default.
	Use v1alpha1.CommitmentUse
	// Declared are the Baseline's commitments that still run, in AWS's order; they decide
	// which rungs consolidate only when empty, whatever their state.
	Declared []commitment.Commitment
	// Open are the Declared ones that rank the class's on-demand rungs now: none when the
	// class ignores commitments.
	Open []commitment.Commitment
	// LeftOut are the entries that price nothing (expired, without facts), field named.
	LeftOut []commitment.Problem
}

// The state's origin when nothing says how much of a plan is used: offline, or without a
// state (no coverage known, or the plan prices none of the class's rungs).
var (
	offlineOrigin   = OriginComputed("commitments (offline: no nodes known, every plan has room)")
	untrackedOrigin = OriginComputed("commitments (no coverage known for the class: ranks nothing)")
)

// resolveCommitments resolves the class's use of its Baseline's commitments, adding each
// to the settings with its origin.
func resolveCommitments(in Inputs, add func(path, value string, origin Origin)) Commitments {
	var use v1alpha1.CommitmentUse
	if w := in.Class.Spec.Weighting; w != nil {
		use = w.Commitments
	}
	var s Commitments
	var origin Origin
	s.Use, origin = pick(
		layer[v1alpha1.CommitmentUse]{v1alpha1.CommitmentsUse, OriginPoolsmithDefault},
		layer[v1alpha1.CommitmentUse]{use, OriginClass})
	if in.Baseline == nil || in.Baseline.Spec.Commitments == nil {
		return s
	}
	add("spec.weighting.commitments", string(s.Use), origin)
	now := in.Options.Commitments.Now
	if now.IsZero() {
		now = time.Now()
	}
	s.Declared, s.LeftOut = commitment.Resolve(in.Baseline.Spec.Commitments, in.Options.Commitments.Export, now)
	sortAWS(s.Declared)
	for _, c := range s.Declared {
		state, known := in.Options.Commitments.States[c.ID]
		value, origin := c.Describe()+", share "+shareText(c), Origin(OriginBaseline)
		switch {
		case s.Use == v1alpha1.CommitmentsIgnore:
			value += ": ignored by the class"
		case !known && in.Options.Commitments.Offline:
			value += ": Open"
			origin = offlineOrigin
		case !known:
			value += ": not ranking"
			origin = untrackedOrigin
		case state.Open:
			value += ": Open since " + state.Since.UTC().Format(time.RFC3339)
		default:
			value += ": Exhausted since " + state.Since.UTC().Format(time.RFC3339)
		}
		if e, ok := in.Options.Commitments.Entitlements[c.ID]; ok {
			value += ", entitlement " + amount(c, e)
		}
		add("commitments["+c.ID+"]", value, origin)
		// Each fact with the layer that gave it: the Baseline, or the signals' export.
		for _, f := range c.Facts {
			add("commitments["+c.ID+"]."+f.Name, f.Value, Origin(f.Origin))
		}
		if s.Use != v1alpha1.CommitmentsIgnore && ((!known && in.Options.Commitments.Offline) || state.Open) {
			s.Open = append(s.Open, c)
		}
	}
	for _, p := range s.LeftOut {
		add("commitments["+p.ID+"]", "left out: "+p.Message, OriginComputed("commitment "+p.Reason))
	}
	return s
}

// sortAWS orders commitments as AWS applies them (Reserved Instances, EC2 Instance plans,
// Compute plans), keeping the declaration order within a kind.
func sortAWS(cs []commitment.Commitment) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Kind < cs[j-1].Kind; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

func shareText(c commitment.Commitment) string { return amount(c, c.Share) }

// amount prints a figure in c's unit.
func amount(c commitment.Commitment, v float64) string {
	if c.Kind == commitment.ReservedInstance {
		return fmt.Sprintf("%g normalized units", v)
	}
	return USD(v) + "/h"
}

// commitmentKey spells out what of the open commitments a rung's price depends on: each
// one's id, kind and pricing facts (never its entitlement or usage, which move with every
// node and would grow the catalog's cache without bound).
func commitmentKey(open []commitment.Commitment) string {
	if len(open) == 0 {
		return ""
	}
	h := sha256.New()
	for _, c := range open {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s\x00%s\x00%s\x00%g\x00%s\x00%s\x00", c.ID, c.Kind, c.Family, c.Region, c.InstanceType, c.Zone, c.EffectiveHourly, c.EffectiveHourlyOrigin, c.RatesRegion)
		fmt.Fprintf(h, "rates %s\x00", c.RatesOrigin)
		for _, t := range sortedKeys(c.Rates) {
			fmt.Fprintf(h, "%s %g\x00", t, c.Rates[t])
		}
		if c.DefaultDiscount != nil {
			fmt.Fprintf(h, "default %g\x00", *c.DefaultDiscount)
		}
		for _, f := range sortedKeys(c.Discounts) {
			fmt.Fprintf(h, "%s %g\x00", f, c.Discounts[f])
		}
	}
	return fmt.Sprintf("\x00commitments %x", h.Sum(nil))
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// coveringAll is the first declared commitment that covers every type an on-demand rung
// allows in the region, if any: its nodes are paid for by the commitment, and Karpenter,
// comparing list prices, would replace them with spot ones as soon as the weights put
// spot first, so the rung consolidates only when empty.
func (r *renderer) coveringAll(t *template, rung Rung) (commitment.Commitment, bool) {
	cs := r.commitments()
	if rung.CapacityType != v1alpha1.CapacityTypeOnDemand || cs.Use == v1alpha1.CommitmentsIgnore || len(cs.Declared) == 0 {
		return commitment.Commitment{}, false
	}
	matcher := catalog.NewMatcher(plain(rungRequirements(t, rung)))
	for _, c := range cs.Declared {
		all, some := true, false
		for _, ty := range r.catalog.Types {
			if _, priced := r.catalog.Prices[r.region][ty.Name]; !priced || !matcher.Matches(ty) {
				continue
			}
			some = true
			if !c.Covers(ty, r.region, "") {
				all = false
				break
			}
		}
		if all && some {
			return c, true
		}
	}
	return commitment.Commitment{}, false
}

// commitments resolves the class's commitments once per render.
func (r *renderer) commitments() Commitments {
	if r.resolvedCommitments == nil {
		c := resolveCommitments(Inputs{Class: r.class, Baseline: r.baseline, Options: r.opts}, func(string, string, Origin) {})
		r.resolvedCommitments = &c
	}
	return *r.resolvedCommitments
}

// whenEmpty makes a rung a commitment covers whole consolidate only when empty.
func (r *renderer) whenEmpty(t *template, rung Rung, np *karpv1.NodePool, o origins) {
	c, ok := r.coveringAll(t, rung)
	if !ok || np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty {
		return
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	o.set("spec.disruption.consolidationPolicy", OriginComputed("commitment "+c.ID+" (covered nodes are paid for; Karpenter compares list prices)"))
}

// commitmentReason is a covered rung's weight reason.
func (r *renderer) commitmentReason(strategy v1alpha1.WeightingStrategy, c rungCost, rank, n int) string {
	cs := r.commitments()
	var com commitment.Commitment
	for _, d := range cs.Open {
		if d.ID == c.commitment {
			com = d
		}
	}
	room := "(offline: no nodes known, every plan has room)"
	if st, ok := r.opts.Commitments.States[com.ID]; ok {
		room = "Open since " + st.Since.UTC().Format("15:04")
		if e, ok := r.opts.Commitments.Entitlements[com.ID]; ok {
			room = "entitlement " + amount(com, e) + ", " + room
		}
		room = "(" + room + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s/%s-h on-demand marginal: %s has room for class %s %s; effective %s/%s-h (%s, %s): %s, median of the %d cheapest of %d types in %s; their prices: %s; ranked by a committed price, paid whether used or not (rank %d of %d)",
		strategy, USD(0), c.unit, com.Describe(), r.class.Name, room, USD(c.effective), c.unit, discountText(c), c.rateSource,
		c.median, c.sample, c.allowed, r.region, c.sourceCounts, rank+1, n)
	return b.String()
}

func discountText(c rungCost) string {
	if c.raw <= 0 {
		return "no list price"
	}
	return fmt.Sprintf("%.4g %% off %s", 100*(1-c.effective/c.raw), USD(c.raw))
}

// CommitmentNodes is, for each of the Baseline's commitments that still run, what one node
// of the class draws from it: the rate ($/h of a Savings Plan) or normalized units (of a
// Reserved Instance) of the median type of the class's dearest on-demand rung whose median
// type it covers. It is the node of the hysteresis (commitment.Next): the node a launch
// most likely takes. A commitment that prices no rung of the class is absent; so is
// every commitment of a class that ignores them. Pure, like Render.
func CommitmentNodes(in Inputs) (map[string]float64, error) {
	r, err := newRenderer(in.Baseline, in.Class, in.Options)
	if err != nil {
		return nil, err
	}
	cs := r.commitments()
	if cs.Use == v1alpha1.CommitmentsIgnore || len(cs.Declared) == 0 {
		return nil, nil
	}
	if _, priced := r.catalog.Prices[r.region]; !priced {
		return nil, nil
	}
	t := r.template()
	rungs := r.ladder(t)
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	riskAdjusted := r.strategy() == v1alpha1.WeightingRiskAdjustedCost
	nodes := map[string]float64{}
	for _, rung := range rungs {
		if rung.CapacityType != v1alpha1.CapacityTypeOnDemand {
			continue
		}
		for _, c := range cs.Declared {
			rc := r.rungCostUnder(t, rung, riskAdjusted, []commitment.Commitment{c}, rungCost{unit: string(r.unit()), priceKind: string(rung.CapacityType)})
			ty := r.catalog.Types[rc.median]
			if rc.commitment != c.ID || ty == nil {
				continue
			}
			if rate, _, ok := c.Rate(ty, r.catalog.Prices[r.region][ty.Name].OnDemand, r.region, ""); ok {
				nodes[c.ID] = max(nodes[c.ID], c.Use(ty, rate))
			}
		}
	}
	return nodes, nil
}
