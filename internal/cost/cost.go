package cost

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
)

// Other stands for a rung or capacity type the class does not have, in status and in
// metric labels, so their number stays bounded by the class's rungs.
const Other = "other"

// ResourceGPU is the extended resource NVIDIA's device plugin advertises.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Node is one of the class's NodeClaims as it is priced.
type Node struct {
	NodeClaim string
	// Rung is the NodePool that launched it (karpenter.sh/nodepool).
	Rung string
	// InstanceType, Zone and CapacityType are the labels Karpenter sets at launch; the
	// type is empty until then.
	InstanceType, Zone, CapacityType string
	// NodeName is its node's name, once it registered.
	NodeName string
	// Allocatable is the NodeClaim's status.allocatable; the catalog's vCPUs and memory
	// stand in while it is empty.
	Allocatable corev1.ResourceList
	// Requested is what the pods running on its node request; empty when none run.
	Requested corev1.ResourceList
}

// Rung is one of the class's NodePools.
type Rung struct {
	Name   string
	Weight int32
	// Requirements are the NodePool's template requirements.
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	// Retiring: no longer rendered (it cannot be the preferred rung).
	Retiring bool
}

// Input is what a class is priced from.
type Input struct {
	Catalog *catalog.Catalog
	Region  string
	Rungs   []Rung
	Nodes   []Node
	// Coverage is what the class's commitments cover of its nodes (commitment.Allocate
	// against its entitlements, as the weights saw it; observe computes it once); nil
	// without commitments: every node at list.
	Coverage *commitment.Ledger
	// UnusedEntitlement is the class's entitlement its nodes leave unused, US dollars per
	// hour (commitment.Ledger.Unused): paid for, not used.
	UnusedEntitlement float64
}

// Figures are amounts in US dollars per hour.
type Figures struct {
	PerHour, Premium, Idle float64
	// Effective is PerHour with each covered node's covered part at its commitment's rate
	// (the amortized figure showback uses); equal to PerHour without commitments.
	Effective float64
}

func (f *Figures) add(g Figures) {
	f.PerHour += g.PerHour
	f.Premium += g.Premium
	f.Idle += g.Idle
	f.Effective += g.Effective
}

// RungFigures are the figures of the nodes of one rung and capacity type.
type RungFigures struct {
	Rung, CapacityType string
	Nodes              int
	Figures
	// Fallback: the rung is not the preferred one, so Premium applies.
	Fallback bool
	// Sources count the nodes each price source priced.
	Sources map[string]int
}

// Breakdown is what a class costs now.
type Breakdown struct {
	Figures
	// Preferred is the rung the premium is measured against: the highest weight.
	Preferred string
	// Rungs are in ladder order (weight, highest first), then rungs the class does not
	// have (Other); within a rung by capacity type.
	Rungs []RungFigures
	// Unpriced say which NodeClaims are not counted, and why.
	Unpriced []string
	// Unused is the class's commitment entitlement its nodes leave unused; Committed
	// whether the class has commitments at all (the effective figures are reported then).
	Unused    float64
	Committed bool
}

// Compute prices every launched NodeClaim of the class.
func Compute(in Input) Breakdown {
	weight := map[string]int32{}
	var b Breakdown
	var preferred *Rung
	for i := range in.Rungs {
		r := &in.Rungs[i]
		weight[r.Name] = r.Weight
		if !r.Retiring && (preferred == nil || r.Weight > preferred.Weight) {
			preferred = r
		}
	}
	if preferred != nil {
		b.Preferred = preferred.Name
	}
	prices := in.Catalog.Prices[in.Region]
	byKey := map[[2]string]*RungFigures{}
	var notLaunched []string
	var noPrice []string
	for _, n := range in.Nodes {
		if n.InstanceType == "" {
			notLaunched = append(notLaunched, n.NodeClaim)
			continue
		}
		price, source, ok := priceOf(prices, n.InstanceType, n.CapacityType)
		if !ok {
			noPrice = append(noPrice, fmt.Sprintf("%s (%s %s)", n.NodeClaim, n.InstanceType, n.CapacityType))
			continue
		}
		rung := n.Rung
		if _, known := weight[rung]; !known {
			rung = Other
		}
		ct := n.CapacityType
		if !knownCapacityType(ct) {
			ct = Other
		}
		key := [2]string{rung, ct}
		rf := byKey[key]
		if rf == nil {
			rf = &RungFigures{Rung: rung, CapacityType: ct, Fallback: preferred != nil && rung != preferred.Name, Sources: map[string]int{}}
			byKey[key] = rf
		}
		f := Figures{PerHour: price, Idle: price * IdleShare(n.Allocatable, n.Requested, in.Catalog.Types[n.InstanceType]), Effective: price}
		if in.Coverage != nil {
			f.Effective = in.Coverage.Effective(n.NodeClaim, price)
		}
		if rf.Fallback {
			if ref, ok := samePreferred(in.Catalog, in.Region, *preferred, n.InstanceType); ok {
				// A covered node's premium is what it draws, not its list price: the
				// commitment is paid whether used or not.
				f.Premium = f.Effective - ref
			} else {
				noPrice = append(noPrice, fmt.Sprintf("%s (premium: rung %s allows no type with the capacity of %s)", n.NodeClaim, preferred.Name, n.InstanceType))
			}
		}
		rf.Nodes++
		rf.add(f)
		rf.Sources[source]++
		b.add(f)
	}
	for _, rf := range byKey {
		b.Rungs = append(b.Rungs, *rf)
	}
	b.Committed, b.Unused = in.Coverage != nil, in.UnusedEntitlement
	// sort.Slice, not slices.SortFunc: a generic sort of this struct is its own 16 KB
	// copy of pdqsort in the binary (issue #23); the order is total either way.
	byRank := func(x, y RungFigures) int {
		wx, okx := weight[x.Rung]
		wy, oky := weight[y.Rung]
		switch {
		case okx != oky:
			if okx {
				return -1
			}
			return 1
		case wx != wy:
			return int(wy) - int(wx)
		case x.Rung != y.Rung:
			return strings.Compare(x.Rung, y.Rung)
		}
		return strings.Compare(x.CapacityType, y.CapacityType)
	}
	sort.Slice(b.Rungs, func(i, j int) bool { return byRank(b.Rungs[i], b.Rungs[j]) < 0 })
	if len(notLaunched) > 0 {
		slices.Sort(notLaunched)
		b.Unpriced = append(b.Unpriced, fmt.Sprintf("not launched yet: %s", listed(notLaunched)))
	}
	if len(noPrice) > 0 {
		slices.Sort(noPrice)
		b.Unpriced = append(b.Unpriced, fmt.Sprintf("no catalog price in %s: %s", in.Region, listed(noPrice)))
	}
	return b
}

// listed names at most a few NodeClaims: status is no listing of a large class.
func listed(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func knownCapacityType(ct string) bool {
	switch ct {
	case karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved:
		return true
	}
	return false
}

// priceOf is what one node of a type costs per hour at a capacity type, and the price's
// source: the spot price (the regional average, as the weights use) for spot, the
// on-demand price for on-demand and reserved capacity.
func priceOf(prices map[string]catalog.Price, instanceType, capacityType string) (float64, string, bool) {
	p, ok := prices[instanceType]
	switch {
	case !ok:
		return 0, "", false
	case capacityType == karpv1.CapacityTypeSpot:
		return p.SpotAvg, p.SpotSource, p.SpotAvg > 0
	case capacityType == karpv1.CapacityTypeOnDemand || capacityType == karpv1.CapacityTypeReserved:
		return p.OnDemand, p.OnDemandSource, p.OnDemand > 0
	}
	return 0, "", false
}

// samePreferred is what the capacity of a node of type t costs on the preferred rung:
// the same type at the rung's capacity type where the rung allows it, else the cheapest
// type it allows with at least t's vCPUs, memory and GPUs.
func samePreferred(cat *catalog.Catalog, region string, rung Rung, t string) (float64, bool) {
	ct := catalog.PinnedCapacityType(rung.Requirements)
	prices := cat.Prices[region]
	want := cat.Types[t]
	if want == nil {
		return 0, false
	}
	matcher := catalog.NewMatcher(rung.Requirements)
	if matcher.Matches(want) {
		if p, _, ok := priceOf(prices, t, ct); ok {
			return p, true
		}
	}
	key := fmt.Sprintf("cost.samePreferred\x00%s\x00%s\x00%d/%d/%d\x00%v", region, ct, want.VCPU, want.MemoryMiB, want.GPUs, rung.Requirements)
	v := cat.Derived(key, func() any {
		best := math.Inf(1)
		for name, ty := range cat.Types {
			if ty.VCPU < want.VCPU || ty.MemoryMiB < want.MemoryMiB || ty.GPUs < want.GPUs || !matcher.Matches(ty) {
				continue
			}
			if p, _, ok := priceOf(prices, name, ct); ok && p < best {
				best = p
			}
		}
		return best
	}).(float64)
	return v, !math.IsInf(v, 1)
}

// IdleShare is the share of a node no pod requests: one minus the requested share of
// the most requested of its CPU, memory and GPUs (a node is as full as its fullest
// resource: no further pod fits once that one is taken). Without allocatable figures the
// catalog's vCPUs, memory and GPUs stand in.
func IdleShare(allocatable, requested corev1.ResourceList, t *catalog.InstanceType) float64 {
	alloc := allocatable
	if alloc.Cpu().IsZero() && t != nil {
		alloc = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(t.MemoryMiB<<20, resource.BinarySI),
		}
		if t.GPUs > 0 {
			alloc[ResourceGPU] = *resource.NewQuantity(int64(t.GPUs), resource.DecimalSI)
		}
	}
	used := 0.0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, ResourceGPU} {
		a, ok := alloc[name]
		if !ok || a.IsZero() {
			continue
		}
		r := requested[name]
		used = math.Max(used, math.Min(1, r.AsApproximateFloat64()/a.AsApproximateFloat64()))
	}
	return 1 - used
}

// Money formats US dollars per hour for status: rounded to a hundredth of a cent, without
// a sign on zero.
func Money(v float64) string {
	v = math.Round(v*1e4) / 1e4
	if v == 0 {
		v = 0 // no "-0.0000"
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// ParseMoney reads an amount written by Money; 0 for an empty or unreadable one.
func ParseMoney(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// Status is the breakdown as status.cost reports it, without the month to date (Accrue).
func (b Breakdown) Status() v1alpha1.CostStatus {
	st := v1alpha1.CostStatus{PerHour: Money(b.PerHour), IdlePerHour: Money(b.Idle), Unpriced: strings.Join(b.Unpriced, "; ")}
	if slices.ContainsFunc(b.Rungs, func(r RungFigures) bool { return r.Fallback }) {
		st.FallbackPremiumPerHour = Money(b.Premium)
	} else {
		st.FallbackPremiumPerHour = Money(0)
	}
	if b.Committed {
		st.EffectivePerHour, st.UnusedEntitlementPerHour = Money(b.Effective), Money(b.Unused)
	}
	for _, r := range b.Rungs {
		rc := v1alpha1.RungCost{Rung: r.Rung, CapacityType: r.CapacityType, Nodes: int32(r.Nodes), PerHour: Money(r.PerHour),
			IdlePerHour: Money(r.Idle), PriceSources: catalog.CountedSources(r.Sources)}
		if r.Fallback {
			rc.FallbackPremiumPerHour = Money(r.Premium)
		}
		if b.Committed {
			rc.EffectivePerHour = Money(r.Effective)
		}
		st.Rungs = append(st.Rungs, rc)
	}
	return st
}

// PerUnit is what one unit of headroom costs per hour on a rung: the lowest, over the
// instance types its requirements allow, of a node's price at the capacity type they pin
// (priceOf, as every node is priced) divided by the units a node of that type holds
// (units; types holding none are skipped). source names that type and where its price
// came from, e.g. "spot r7g.large: catalog 2025-05-28". ok is false when no allowed type
// has a price in region.
func PerUnit(cat *catalog.Catalog, region string, requirements []karpv1.NodeSelectorRequirementWithMinValues, units func(*catalog.InstanceType) float64) (price float64, source string, ok bool) {
	ct := catalog.PinnedCapacityType(requirements)
	matcher := catalog.NewMatcher(requirements)
	prices := cat.Prices[region]
	best, bestName, bestSource := math.Inf(1), "", ""
	for name, t := range cat.Types {
		if t.PriceOnly || !matcher.Matches(t) {
			continue
		}
		n := units(t)
		p, src, priced := priceOf(prices, name, ct)
		if n < 1 || !priced {
			continue
		}
		if per := p / n; per < best || (per == best && name < bestName) {
			best, bestName, bestSource = per, name, src
		}
	}
	if math.IsInf(best, 1) {
		return 0, "", false
	}
	return best, fmt.Sprintf("%s %s: %s", ct, bestName, bestSource), true
}
