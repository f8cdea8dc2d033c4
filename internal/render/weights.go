package render

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/headroom"
)

// RiskPenalty multiplies a spot price by its Spot Instance Advisor interruption bucket
// under RiskAdjustedCost: an interruption costs the restart of the node's pods and a new
// launch, so a frequently interrupted type is worth less than its price says. A type the
// advisor has no figure for is treated as between 10-15% and 15-20%. On-demand and
// reserved prices are not adjusted.
var RiskPenalty = map[catalog.Bucket]float64{
	catalog.BucketUnder5:  1.00,
	catalog.Bucket5To10:   1.05,
	catalog.Bucket10To15:  1.10,
	catalog.Bucket15To20:  1.20,
	catalog.BucketOver20:  1.35,
	catalog.BucketUnknown: 1.15,
}

// RungSample is how many of a rung's cheapest types (per unit, after the risk penalty
// under RiskAdjustedCost) its price is taken over: the most instance types the AWS
// provider passes to one EC2 Fleet launch (maxInstanceTypes in its instance provider), so
// the sample is what a launch could choose from. The rung's price is the sample's median
// (the lower median: a real type's price), which one odd type moves by at most one
// neighbour; see docs/ladder.md, Weights, for the figures behind the choice.
const RungSample = 60

// rungCost is what a rung's nodes cost per unit of what the class buys.
type rungCost struct {
	known        bool
	price        float64 // what ranks the rung: after the risk penalty under RiskAdjustedCost
	raw          float64 // the median type's unit price before the penalty
	penalty      float64
	bucket       catalog.Bucket // of the median type
	median       string         // the median type
	source       string         // the median type's price source
	sample       int            // types the median is over
	allowed      int            // priced types the rung allows
	sourceCounts string         // every source in the sample, with counts
	unit         string
	priceKind    string // spot, on-demand or reserved
	// effective is the median type's unit price under the commitment that covers it (what
	// it draws from the commitment), else price; it breaks ties of price (two covered rungs
	// at a marginal 0: the one the commitment buys more of first).
	effective  float64
	commitment string // the id of the Open commitment that priced the median type
	rateSource string // where that commitment's rate came from
}

// strategy is the class's weighting strategy, else its profile's, else RiskAdjustedCost.
func (r *renderer) strategy() v1alpha1.WeightingStrategy {
	if w := r.class.Spec.Weighting; w != nil && w.Strategy != "" {
		return w.Strategy
	}
	if r.profile.Strategy != "" {
		return r.profile.Strategy
	}
	return v1alpha1.WeightingRiskAdjustedCost
}

// weigh gives each rung its weight: ceiling, ceiling-1, ... in ladder order (Static) or
// in order of cost. Rungs without a price keep their ladder order after priced ones;
// without any price for the region every rung keeps its ladder order.
func (r *renderer) weigh(t *template, rungs []Rung, ceiling int32) error {
	if lowest := ceiling - int32(len(rungs)) + 1; lowest < 1 {
		return fmt.Errorf("ceiling %d leaves no room for %d rungs with distinct weights of at least 1; raise it to at least %d", ceiling, len(rungs), len(rungs))
	}
	strategy := r.strategy()
	order := make([]int, len(rungs))
	for i := range order {
		order[i] = i
	}
	costs := make([]rungCost, len(rungs))
	_, regionPriced := r.catalog.Prices[r.region]
	// A reserved rung ranks first under every strategy: the reservation is billed whether
	// used or not, and Karpenter itself prefers reserved offerings.
	reserved := func(i int) bool { return rungs[i].CapacityType == v1alpha1.CapacityTypeReserved }
	if strategy != v1alpha1.WeightingStatic && regionPriced {
		for i, rung := range rungs {
			costs[i] = r.rungCost(t, rung, strategy == v1alpha1.WeightingRiskAdjustedCost)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		if reserved(order[a]) != reserved(order[b]) {
			return reserved(order[a])
		}
		ca, cb := costs[order[a]], costs[order[b]]
		if ca.known != cb.known {
			return ca.known
		}
		if ca.known && round9(ca.price) != round9(cb.price) {
			return ca.price < cb.price
		}
		if ca.known && round9(ca.effective) != round9(cb.effective) {
			return ca.effective < cb.effective
		}
		return order[a] < order[b]
	})
	for rank, i := range order {
		if costs[i].priceKind == "" {
			costs[i].priceKind = string(rungs[i].CapacityType)
		}
		rungs[i].Weight = ceiling - int32(rank)
		rungs[i].WeightReason = r.weightReason(strategy, regionPriced, costs[i], rank, len(rungs))
		rungs[i].Commitment = costs[i].commitment
		if costs[i].sourceCounts != "" {
			rungs[i].PriceSources = costs[i].priceKind + ": " + costs[i].sourceCounts
		}
	}
	return nil
}

func (r *renderer) weightReason(strategy v1alpha1.WeightingStrategy, regionPriced bool, c rungCost, rank, n int) string {
	switch {
	case strategy == v1alpha1.WeightingStatic && c.priceKind == string(v1alpha1.CapacityTypeReserved):
		return fmt.Sprintf("Static, reserved capacity first, as it is already paid for (rung %d of %d)", rank+1, n)
	case strategy == v1alpha1.WeightingStatic:
		return fmt.Sprintf("Static, rung %d of %d in preference order", rank+1, n)
	case !regionPriced:
		return fmt.Sprintf("%s: the catalog has no prices for %s, so rungs keep their preference order (rank %d of %d)", strategy, r.region, rank+1, n)
	case !c.known:
		return fmt.Sprintf("%s: no catalog price for the rung's types in %s; ranked after priced rungs, in preference order (rank %d of %d)", strategy, r.region, rank+1, n)
	case c.priceKind == string(v1alpha1.CapacityTypeReserved):
		return fmt.Sprintf("%s: reserved capacity is already paid for (rank %d of %d)", strategy, rank+1, n)
	case c.commitment != "":
		return r.commitmentReason(strategy, c, rank, n)
	}
	s := fmt.Sprintf("%s/%s-h %s (%s)", USD(c.raw), c.unit, c.priceKind, c.source)
	if c.priceKind == string(v1alpha1.CapacityTypeSpot) {
		s += ", interruption " + c.bucket.String()
		if strategy == v1alpha1.WeightingRiskAdjustedCost {
			s += fmt.Sprintf(" (x%.2f = %s)", c.penalty, USD(c.price)) // the penalty is one of RiskPenalty's
		}
	}
	return fmt.Sprintf("%s: %s: %s, median of the %d cheapest of %d types in %s; their prices: %s (rank %d of %d)",
		strategy, s, c.median, c.sample, c.allowed, r.region, c.sourceCounts, rank+1, n)
}

// rungCost prices a rung at the median unit price of the RungSample cheapest types it
// allows.
func (r *renderer) rungCost(t *template, rung Rung, riskAdjusted bool) rungCost {
	c := rungCost{unit: string(r.unit()), priceKind: string(rung.CapacityType)}
	if r.podShape() != nil {
		c.unit = "pod"
	}
	if rung.CapacityType == v1alpha1.CapacityTypeReserved {
		return rungCost{known: true, priceKind: c.priceKind}
	}
	var open []commitment.Commitment
	if rung.CapacityType == v1alpha1.CapacityTypeOnDemand {
		open = r.commitments().Open
	}
	return r.rungCostUnder(t, rung, riskAdjusted, open, c)
}

// rungCostUnder is rungCost with the given commitments open (c holds the unit and kind).
func (r *renderer) rungCostUnder(t *template, rung Rung, riskAdjusted bool, open []commitment.Commitment, c rungCost) rungCost {
	reqs := plain(rungRequirements(t, rung))
	// The scan below reads only the catalog and what the key names, so classes with the
	// same rung share it (on a Baseline edit it was a quarter of each render's CPU).
	key := costKey(r.region, r.unit(), r.podShape(), rung.CapacityType, riskAdjusted, reqs) + commitmentKey(open)
	return r.catalog.Derived(key, func() any { return r.scanCost(c, reqs, rung, riskAdjusted, open) }).(rungCost)
}

// costKey spells out every input of scanCost besides the catalog.
func costKey(region string, u catalog.Unit, shape *v1alpha1.PodShape, ct v1alpha1.CapacityType, riskAdjusted bool, reqs []karpv1.NodeSelectorRequirementWithMinValues) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rungCost\x00%s\x00%s\x00%s\x00%t", region, u, ct, riskAdjusted)
	if shape != nil {
		q := func(v *resource.Quantity) string {
			if v == nil {
				return ""
			}
			return v.String()
		}
		gpu := ""
		if shape.GPU != nil {
			gpu = strconv.FormatInt(int64(*shape.GPU), 10)
		}
		fmt.Fprintf(&b, "\x00shape %s/%s/%s", q(shape.CPU), q(shape.Memory), gpu)
	}
	for _, r := range reqs {
		fmt.Fprintf(&b, "\x00%s %s %s", r.Key, r.Operator, strings.Join(r.Values, ","))
	}
	return b.String()
}

// scanCost prices a rung over every type of the catalog its requirements allow. The
// sample is chosen by list price, as Karpenter launches by it; a type an open commitment
// covers is then valued at its marginal price, 0, with its effective price beside it.
func (r *renderer) scanCost(c rungCost, reqs []karpv1.NodeSelectorRequirementWithMinValues, rung Rung, riskAdjusted bool, open []commitment.Commitment) rungCost {
	matcher := catalog.NewMatcher(reqs)
	type candidate struct {
		name                          string
		unitPrice, adj, value, effect float64
		bucket                        catalog.Bucket
		source, commitment, rate      string
	}
	var cands []candidate
	for _, ty := range r.catalog.Types {
		p, ok := r.catalog.Prices[r.region][ty.Name]
		if !ok || !matcher.Matches(ty) {
			continue
		}
		hourly, source := p.OnDemand, p.OnDemandSource
		if rung.CapacityType == v1alpha1.CapacityTypeSpot {
			if p.SpotAvg == 0 {
				continue
			}
			hourly, source = p.SpotAvg, p.SpotSource
		}
		units := r.unitsOf(ty)
		if units <= 0 {
			continue
		}
		cand := candidate{name: ty.Name, unitPrice: hourly / units, bucket: p.Interruption, source: source}
		cand.adj = cand.unitPrice
		if riskAdjusted && rung.CapacityType == v1alpha1.CapacityTypeSpot {
			cand.adj *= RiskPenalty[p.Interruption]
		}
		cand.value, cand.effect = cand.adj, cand.adj
		if com, rate, source, ok := commitment.Covering(open, ty, p.OnDemand, r.region); ok {
			cand.value, cand.effect, cand.commitment, cand.rate = 0, rate/units, com.ID, source
		}
		cands = append(cands, cand)
	}
	if len(cands) == 0 {
		return c
	}
	sort.Slice(cands, func(a, b int) bool {
		if round9(cands[a].adj) != round9(cands[b].adj) {
			return cands[a].adj < cands[b].adj
		}
		return cands[a].name < cands[b].name
	})
	sample := cands[:min(RungSample, len(cands))]
	mid := sample[(len(sample)-1)/2]
	counts := map[string]int{}
	for _, cand := range sample {
		counts[cand.source]++
	}
	c.known, c.raw, c.price, c.bucket = true, mid.unitPrice, mid.value, mid.bucket
	c.effective, c.commitment, c.rateSource = mid.effect, mid.commitment, mid.rate
	c.median, c.source, c.sample, c.allowed = mid.name, mid.source, len(sample), len(cands)
	c.penalty = mid.adj / c.raw
	c.sourceCounts = catalog.CountedSources(counts)
	return c
}

func (r *renderer) podShape() *v1alpha1.PodShape {
	if w := r.class.Spec.Weighting; w != nil {
		return w.PodShape
	}
	return nil
}

// unit is what the profile buys.
func (r *renderer) unit() catalog.Unit {
	switch r.profileName {
	case v1alpha1.ProfileMemoryOptimized:
		return catalog.UnitMemory
	case v1alpha1.ProfileGPU:
		return catalog.UnitGPU
	}
	return catalog.UnitVCPU
}

// unitsOf is how many units of what the class buys a type offers: the profile's unit, or
// with a pod shape how many such pods fit after Karpenter's overhead (catalog's model).
func (r *renderer) unitsOf(t *catalog.InstanceType) float64 {
	shape := r.podShape()
	if shape == nil {
		return r.unit().Of(t)
	}
	return headroom.UnitsOf(t, headroom.Shape(headroom.FromPodShape(shape)))
}

// USD formats money for status, events and explain: rounded to a hundredth of a cent
// ($0.0136; rung prices per vCPU-hour are cents), and never longer than a few characters.
// Signals refuse prices above signals.MaxHourlyPrice, but a figure of any size that
// reaches here still prints in exponent form ($1.7e+308) rather than as 309 digits.
func USD(v float64) string {
	if math.IsNaN(v) || math.Abs(v) >= 1e6 {
		return "$" + strconv.FormatFloat(v, 'g', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 4, 64)
}

func round9(v float64) float64 { return math.Round(v*1e9) / 1e9 }
