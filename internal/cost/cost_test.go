package cost

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
)

const region = "us-east-1"

func rung(name string, weight int32, ct, arch string) Rung {
	return Rung{Name: name, Weight: weight, Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{ct}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
	}}
}

func load(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The class's cost is the sum of its NodeClaims' catalog prices, each at its own capacity
// type; nodes below the preferred rung carry the premium over the same type there.
func TestComputePricesEachNodeClaim(t *testing.T) {
	cat := load(t)
	p := cat.Prices[region]
	in := Input{Catalog: cat, Region: region,
		Rungs: []Rung{rung("web-spot-amd64", 100, "spot", "amd64"), rung("web-on-demand-amd64", 99, "on-demand", "amd64")},
		Nodes: []Node{
			{NodeClaim: "a", Rung: "web-spot-amd64", InstanceType: "m5.large", CapacityType: "spot", Zone: "us-east-1a"},
			{NodeClaim: "b", Rung: "web-spot-amd64", InstanceType: "c5.xlarge", CapacityType: "spot", Zone: "us-east-1b"},
			{NodeClaim: "c", Rung: "web-on-demand-amd64", InstanceType: "m5.large", CapacityType: "on-demand", Zone: "us-east-1a"},
			{NodeClaim: "d", Rung: "web-on-demand-amd64"}, // not launched
		}}
	b := Compute(in)
	want := p["m5.large"].SpotAvg + p["c5.xlarge"].SpotAvg + p["m5.large"].OnDemand
	if !near(b.PerHour, want) {
		t.Fatalf("perHour %v, want %v", b.PerHour, want)
	}
	if premium := p["m5.large"].OnDemand - p["m5.large"].SpotAvg; !near(b.Premium, premium) || premium <= 0 {
		t.Fatalf("premium %v, want %v (m5.large on demand over spot)", b.Premium, premium)
	}
	if b.Preferred != "web-spot-amd64" || len(b.Rungs) != 2 || b.Rungs[0].Rung != "web-spot-amd64" || b.Rungs[0].Nodes != 2 || b.Rungs[0].Fallback || !b.Rungs[1].Fallback {
		t.Fatalf("rungs %+v", b.Rungs)
	}
	if len(b.Unpriced) != 1 || b.Unpriced[0] != "not launched yet: d" {
		t.Fatalf("unpriced %q", b.Unpriced)
	}
	st := b.Status()
	if st.PerHour != Money(want) || st.Rungs[0].FallbackPremiumPerHour != "" || st.Rungs[1].FallbackPremiumPerHour != Money(b.Premium) {
		t.Fatalf("status %+v", st)
	}
	if st.Rungs[0].PriceSources != cat.Source(catalog.SourceCatalog)+" (2)" {
		t.Fatalf("price sources %q", st.Rungs[0].PriceSources)
	}
}

// A fallback type the preferred rung does not allow (another architecture) is compared
// with the cheapest type it allows that has at least its vCPUs and memory.
func TestPremiumAcrossArchitectures(t *testing.T) {
	cat := load(t)
	p := cat.Prices[region]
	in := Input{Catalog: cat, Region: region,
		Rungs: []Rung{rung("x-spot-arm64", 100, "spot", "arm64"), rung("x-on-demand-amd64", 99, "on-demand", "amd64")},
		Nodes: []Node{{NodeClaim: "a", Rung: "x-on-demand-amd64", InstanceType: "m5.large", CapacityType: "on-demand"}}}
	m5 := cat.Types["m5.large"]
	best := math.Inf(1)
	for name, ty := range cat.Types {
		if ty.Arch == "arm64" && !ty.PriceOnly && ty.VCPU >= m5.VCPU && ty.MemoryMiB >= m5.MemoryMiB && ty.GPUs >= m5.GPUs && p[name].SpotAvg > 0 {
			best = math.Min(best, p[name].SpotAvg)
		}
	}
	b := Compute(in)
	if math.IsInf(best, 1) || !near(b.Premium, p["m5.large"].OnDemand-best) {
		t.Fatalf("premium %v, want %v - %v", b.Premium, p["m5.large"].OnDemand, best)
	}
}

// Nodes on rungs the class does not have, capacity types Karpenter does not use and
// types without a price are bounded or named, never listed as they come.
func TestComputeBoundsWhatItDoesNotKnow(t *testing.T) {
	cat := load(t)
	in := Input{Catalog: cat, Region: region, Rungs: []Rung{rung("y-spot-amd64", 100, "spot", "amd64")},
		Nodes: []Node{
			{NodeClaim: "a", Rung: "someone-elses", InstanceType: "m5.large", CapacityType: "on-demand"},
			{NodeClaim: "b", Rung: "y-spot-amd64", InstanceType: "m5.large", CapacityType: "weird"},
			{NodeClaim: "c", Rung: "y-spot-amd64", InstanceType: "no-such.type", CapacityType: "spot"},
		}}
	b := Compute(in)
	if len(b.Rungs) != 1 || b.Rungs[0].Rung != Other || b.Rungs[0].CapacityType != "on-demand" {
		t.Fatalf("rungs %+v", b.Rungs)
	}
	if len(b.Unpriced) != 1 || b.Unpriced[0] != "no catalog price in us-east-1: b (m5.large weird), c (no-such.type spot)" {
		t.Fatalf("unpriced %q", b.Unpriced)
	}
}

func TestIdleShare(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	for _, c := range []struct {
		name      string
		requested corev1.ResourceList
		want      float64
	}{
		{"nothing runs", nil, 1},
		{"CPU the fuller", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}, 0.25},
		{"memory the fuller", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("6Gi")}, 0.25},
		{"over-requested", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}, 0},
	} {
		if got := IdleShare(alloc, c.requested, nil); !near(got, c.want) {
			t.Errorf("%s: idle share %v, want %v", c.name, got, c.want)
		}
	}
	// Without allocatable (not registered yet) the catalog's figures stand in.
	m5 := load(t).Types["m5.large"]
	if got := IdleShare(nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, m5); !near(got, 0.5) {
		t.Errorf("catalog stand-in: idle share %v, want 0.5", got)
	}
}

func TestAccrue(t *testing.T) {
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: tm}
	}
	now := at("2026-12-02T12:00:00Z").Time
	for _, c := range []struct {
		name string
		prev *v1alpha1.CostStatus
		want float64
	}{
		{"first pass", nil, 0},
		{"two hours at the last rate", &v1alpha1.CostStatus{PerHour: "1.5000", MonthToDate: "10.0000", Month: "2026-12", AccumulatedAt: at("2026-12-02T10:00:00Z")}, 13},
		{"the month turned: only this month's hours", &v1alpha1.CostStatus{PerHour: "2.0000", MonthToDate: "900.0000", Month: "2026-11", AccumulatedAt: at("2026-11-30T23:00:00Z")}, 2 * 36},
		{"a clock behind the last accrual", &v1alpha1.CostStatus{PerHour: "2.0000", MonthToDate: "5.0000", Month: "2026-12", AccumulatedAt: at("2026-12-02T13:00:00Z")}, 5},
	} {
		if got := Accrue(c.prev, now); !near(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Status is written when a rounded figure changes or the accrual is due, never on every
// pass.
func TestNextWritesOnlyWhatChanged(t *testing.T) {
	cat := load(t)
	in := Input{Catalog: cat, Region: region, Rungs: []Rung{rung("z-spot-amd64", 100, "spot", "amd64")},
		Nodes: []Node{{NodeClaim: "a", Rung: "z-spot-amd64", InstanceType: "m5.large", CapacityType: "spot"}}}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	if st, write := Next(nil, Compute(Input{Catalog: cat, Region: region}), now); write || st != nil {
		t.Fatalf("a class without nodes writes nothing: %v %v", st, write)
	}
	first, write := Next(nil, Compute(in), now)
	if !write || first.MonthToDate != "0.0000" || first.Month != "2026-12" {
		t.Fatalf("first: %+v %v", first, write)
	}
	if _, write := Next(first, Compute(in), now.Add(AccrualInterval-time.Second)); write {
		t.Fatal("unchanged figures before the accrual interval were written")
	}
	later, write := Next(first, Compute(in), now.Add(AccrualInterval))
	if !write || later.MonthToDate != Money(cat.Prices[region]["m5.large"].SpotAvg*AccrualInterval.Hours()) {
		t.Fatalf("accrual: %+v %v", later, write)
	}
	in.Nodes = append(in.Nodes, Node{NodeClaim: "b", Rung: "z-spot-amd64", InstanceType: "m5.large", CapacityType: "spot"})
	if _, write := Next(later, Compute(in), now.Add(AccrualInterval+time.Second)); !write {
		t.Fatal("a changed cost was not written at once")
	}
}

func TestJudge(t *testing.T) {
	if Judge(nil, 5) != nil {
		t.Fatal("no budget, no verdict")
	}
	for _, c := range []struct {
		budget     v1alpha1.Budget
		perHour    float64
		over, hold bool
	}{
		{v1alpha1.Budget{PerHour: "1.00"}, 0.99994, false, false},
		{v1alpha1.Budget{PerHour: "1.00"}, 0.99995, true, true}, // rounded as status shows it: 1.0000
		{v1alpha1.Budget{PerHour: "1", Mode: v1alpha1.BudgetEnforce}, 3, true, true},
		{v1alpha1.Budget{PerHour: "1", Mode: v1alpha1.BudgetWarn}, 3, true, false},
	} {
		v := Judge(&c.budget, c.perHour)
		if v.Over != c.over || v.Hold != c.hold {
			t.Errorf("budget %+v at %v: over %v hold %v, want %v %v", c.budget, c.perHour, v.Over, v.Hold, c.over, c.hold)
		}
	}
}

// A unit of headroom costs the cheapest price per unit over the rung's types, each at the
// capacity type the rung pins, and names the type and the price's source.
func TestPerUnit(t *testing.T) {
	cat := load(t)
	prices := cat.Prices[region]
	large, xlarge := prices["r7g.large"], prices["r7g.xlarge"]
	r := rung("r", 10, karpv1.CapacityTypeSpot, "arm64")
	r.Requirements = append(r.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"r7g.large", "r7g.xlarge"}})
	holds := func(units map[string]float64) func(*catalog.InstanceType) float64 {
		return func(ty *catalog.InstanceType) float64 { return units[ty.Name] }
	}
	for _, tc := range []struct {
		name   string
		units  map[string]float64
		ct     string
		want   float64
		source string
	}{
		{"four units on an xlarge beat one on a large", map[string]float64{"r7g.large": 1, "r7g.xlarge": 4}, karpv1.CapacityTypeSpot, xlarge.SpotAvg / 4, "spot r7g.xlarge: " + xlarge.SpotSource},
		{"a type that holds none is skipped", map[string]float64{"r7g.large": 1}, karpv1.CapacityTypeSpot, large.SpotAvg, "spot r7g.large: " + large.SpotSource},
		{"on-demand prices", map[string]float64{"r7g.large": 2, "r7g.xlarge": 2}, karpv1.CapacityTypeOnDemand, large.OnDemand / 2, "on-demand r7g.large: " + large.OnDemandSource},
	} {
		reqs := append([]karpv1.NodeSelectorRequirementWithMinValues(nil), r.Requirements...)
		reqs[0].Values = []string{tc.ct}
		got, source, ok := PerUnit(cat, region, reqs, holds(tc.units))
		if !ok || !near(got, tc.want) || source != tc.source {
			t.Errorf("%s: PerUnit = %v, %q, %v; want %v, %q", tc.name, got, source, ok, tc.want, tc.source)
		}
	}
	if _, _, ok := PerUnit(cat, "mars-north-1", r.Requirements, holds(map[string]float64{"r7g.large": 1})); ok {
		t.Error("a region without prices priced a unit")
	}
}

// With commitments, each node's covered part is priced at its commitment's rate: the
// docs' six m7g.xlarge against a $0.20/h part of the worked example's plan cost $0.9792/h
// at list and $0.8893/h effective; the fallback premium is judged on the effective price;
// without coverage effective equals list.
func TestComputeEffectiveUnderCommitments(t *testing.T) {
	cat := load(t)
	in := Input{Catalog: cat, Region: region,
		Rungs: []Rung{rung("spot", 100, karpv1.CapacityTypeSpot, "arm64"), rung("od", 99, karpv1.CapacityTypeOnDemand, "arm64")}}
	var nodes []commitment.Node
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		in.Nodes = append(in.Nodes, Node{NodeClaim: name, Rung: "od", InstanceType: "m7g.xlarge", CapacityType: karpv1.CapacityTypeOnDemand})
		nodes = append(nodes, commitment.Node{Name: name, Type: cat.Types["m7g.xlarge"], CapacityType: karpv1.CapacityTypeOnDemand, OnDemand: cat.Prices[region]["m7g.xlarge"].OnDemand})
	}
	list := Compute(in)
	if !near(list.Effective, list.PerHour) || list.Status().EffectivePerHour != "" {
		t.Errorf("without commitments: effective %v, list %v, status %q", list.Effective, list.PerHour, list.Status().EffectivePerHour)
	}
	sp := commitment.Commitment{ID: "sp", Kind: commitment.EC2InstanceSavingsPlan, Family: "m7g", Region: region, Discounts: map[string]float64{"m7g": 0.31}, Share: 1.2}
	l := commitment.Allocate(nodes, []commitment.Commitment{sp}, region, map[string]float64{"sp": 0.2})
	in.Coverage, in.UnusedEntitlement = &l, 0
	b := Compute(in)
	st := b.Status()
	if st.PerHour != "0.9792" || st.EffectivePerHour != "0.8893" || st.UnusedEntitlementPerHour != "0.0000" || st.Rungs[0].EffectivePerHour != "0.8893" {
		t.Errorf("status %+v", st)
	}
	if !near(b.Premium, list.Premium-(b.PerHour-b.Effective)) {
		t.Errorf("premium %v, want the list premium %v less what the plan covers", b.Premium, list.Premium)
	}
}
