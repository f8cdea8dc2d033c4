package commitment_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// workedExample is docs/commitments.md's plan: EC2Instance m7g us-east-1, $3.00/h,
// 31 % off m7g, this cluster's share 40 %.
func workedExample() *v1alpha1.Commitments {
	return &v1alpha1.Commitments{
		SavingsPlans: []v1alpha1.SavingsPlan{{
			ID: "sp-0a1b2c3d", Type: v1alpha1.SavingsPlanEC2Instance, Commitment: "3.00", Family: "m7g", Region: "us-east-1",
			Discount: &v1alpha1.Discount{Families: []v1alpha1.FamilyDiscount{{Family: "m7g", Discount: "31%"}}},
			Share:    v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)},
		}},
		Allocations: []v1alpha1.CommitmentAllocation{{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "api"}}, Percent: 50}},
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func types(t *testing.T) (*catalog.Catalog, func(string) commitment.Node) {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	return cat, func(spec string) commitment.Node { // "name type capacity"
		f := strings.Fields(spec)
		ty := cat.Types[f[1]]
		return commitment.Node{Name: f[0], Type: ty, CapacityType: f[2], OnDemand: cat.Prices["us-east-1"][f[1]].OnDemand}
	}
}

// The worked example's figures: S = $1.20/h, E_api = $0.60/h, m7g.xlarge at $0.112608/h.
func TestWorkedExampleRateShareAndEntitlement(t *testing.T) {
	cat, _ := types(t)
	cs, problems := commitment.Resolve(workedExample(), commitment.Export{}, now)
	if len(cs) != 1 || len(problems) != 0 {
		t.Fatalf("resolved %v, problems %v", cs, problems)
	}
	sp := cs[0]
	if !near(sp.Share, 1.20) {
		t.Errorf("share = %v, want 1.20", sp.Share)
	}
	f := commitment.Entitlements(workedExample().Allocations, []commitment.Class{{Name: "api", Labels: map[string]string{"team": "api"}}})
	if !near(f["api"].Of*sp.Share, 0.60) || f["api"].Rule != "allocations[0]: 50%" {
		t.Errorf("api's entitlement = %v of $1.20 (%s), want $0.60", f["api"].Of, f["api"].Rule)
	}
	m7g := cat.Types["m7g.xlarge"]
	rate, source, ok := sp.Rate(m7g, cat.Prices["us-east-1"]["m7g.xlarge"].OnDemand, "us-east-1", "")
	if !ok || !near(rate, 0.112608) || source != "baseline:discount.families" {
		t.Errorf("rate = %v %q %v, want 0.112608 from baseline:discount.families", rate, source, ok)
	}
	if _, _, ok := sp.Rate(cat.Types["c7g.xlarge"], 0.145, "us-east-1", ""); ok {
		t.Error("an m7g plan priced c7g")
	}
	if _, _, ok := sp.Rate(m7g, 0.1632, "eu-west-1", ""); ok {
		t.Error("a us-east-1 plan priced eu-west-1")
	}
}

// §5's one-node-at-a-time table, row by row: used, room, ratio and state after each node.
func TestWorkedExampleOneNodeAtATime(t *testing.T) {
	_, node := types(t)
	cs, _ := commitment.Resolve(workedExample(), commitment.Export{}, now)
	sp := cs[0]
	ent := map[string]float64{sp.ID: 0.60}
	const perNode = 0.112608
	rows := []struct {
		nodes      int
		used, room float64
		ratio      string
		open       bool
	}{
		{0, 0, 0.600000, "0.0", true},
		{1, 0.112608, 0.487392, "18.8", true},
		{2, 0.225216, 0.374784, "37.5", true},
		{3, 0.337824, 0.262176, "56.3", true},
		{4, 0.450432, 0.149568, "75.1", true},
		{5, 0.563040, 0.036960, "93.8", false},
	}
	var nodes []commitment.Node
	var state *commitment.State
	for _, row := range rows {
		for len(nodes) < row.nodes {
			nodes = append(nodes, node(fmt.Sprintf("n%d m7g.xlarge on-demand", len(nodes))))
		}
		l := commitment.Allocate(nodes, cs, "us-east-1", ent)
		room := l.Room(sp, ent[sp.ID])
		if !near(l.Used[sp.ID], row.used) || !near(room, row.room) || fmt.Sprintf("%.1f", 100*l.Used[sp.ID]/0.60) != row.ratio {
			t.Errorf("%d nodes: used %v room %v, want %v %v (%s %%)", row.nodes, l.Used[sp.ID], room, row.used, row.room, row.ratio)
		}
		s := commitment.Next(state, room, perNode, now, commitment.DefaultOpenDwell)
		if s.Open != row.open {
			t.Errorf("%d nodes: open = %v, want %v", row.nodes, s.Open, row.open)
		}
		state = &s
	}
	// Scale-in: at 4 nodes the room is under two nodes, so it stays Exhausted; at 3 it
	// has two nodes of room, and opens once that has held for the dwell.
	l := commitment.Allocate(nodes[:4], cs, "us-east-1", ent)
	s := commitment.Next(state, l.Room(sp, 0.60), perNode, now.Add(time.Minute), commitment.DefaultOpenDwell)
	if s.Open || !s.OpenPendingSince.IsZero() {
		t.Errorf("4 nodes after exhaustion: %+v, want Exhausted, nothing pending", s)
	}
	l = commitment.Allocate(nodes[:3], cs, "us-east-1", ent)
	s = commitment.Next(&s, l.Room(sp, 0.60), perNode, now.Add(2*time.Minute), commitment.DefaultOpenDwell)
	if s.Open || !s.OpenPendingSince.Equal(now.Add(2*time.Minute)) {
		t.Errorf("3 nodes: %+v, want Exhausted and pending since +2m", s)
	}
	s2 := commitment.Next(&s, l.Room(sp, 0.60), perNode, now.Add(6*time.Minute), commitment.DefaultOpenDwell)
	if s2.Open {
		t.Errorf("3 nodes, 4 minutes pending: open before the dwell")
	}
	s3 := commitment.Next(&s2, l.Room(sp, 0.60), perNode, now.Add(7*time.Minute), commitment.DefaultOpenDwell)
	if !s3.Open {
		t.Errorf("3 nodes, 5 minutes pending: still %+v", s3)
	}
	// A dip below two nodes during the dwell restarts it.
	l4 := commitment.Allocate(nodes[:4], cs, "us-east-1", ent)
	s4 := commitment.Next(&s, l4.Room(sp, 0.60), perNode, now.Add(4*time.Minute), commitment.DefaultOpenDwell)
	if !s4.OpenPendingSince.IsZero() {
		t.Errorf("a dip did not reset the dwell: %+v", s4)
	}
}

// One batch of 6 (what simulate shows): the 6th node is covered for 32.8 % of its hour.
func TestWorkedExampleBatchOvershoot(t *testing.T) {
	_, node := types(t)
	cs, _ := commitment.Resolve(workedExample(), commitment.Export{}, now)
	var nodes []commitment.Node
	for i := range 6 {
		nodes = append(nodes, node(fmt.Sprintf("n%d m7g.xlarge on-demand", i)))
	}
	l := commitment.Allocate(nodes, cs, "us-east-1", map[string]float64{"sp-0a1b2c3d": 0.60})
	if got := l.Covered["n5"]; math.Abs(got-0.328218) > 1e-6 {
		t.Errorf("6th node covered %v, want 0.328218", got)
	}
	bill := 0.60 + (1-l.Covered["n5"])*0.1632
	if math.Abs(bill-0.709635) > 1e-6 {
		t.Errorf("batch bill = %v, want 0.709635", bill)
	}
}

// AWS's order: a Reserved Instance before an EC2 Instance plan before a Compute plan;
// within a kind the higher savings first; spot never covered.
func TestAllocateInAWSOrder(t *testing.T) {
	_, node := types(t)
	spec := &v1alpha1.Commitments{
		SavingsPlans: []v1alpha1.SavingsPlan{
			{ID: "compute", Type: v1alpha1.SavingsPlanCompute, Discount: &v1alpha1.Discount{Default: "50%"}, Share: v1alpha1.CommitmentShare{Hourly: "10"}},
			{ID: "ec2-low", Type: v1alpha1.SavingsPlanEC2Instance, Family: "m7g", Discount: &v1alpha1.Discount{Default: "20%"}, Share: v1alpha1.CommitmentShare{Hourly: "10"}},
			{ID: "ec2-high", Type: v1alpha1.SavingsPlanEC2Instance, Family: "m7g", Discount: &v1alpha1.Discount{Default: "30%"}, Share: v1alpha1.CommitmentShare{Hourly: "0.11424"}},
		},
		ReservedInstances: []v1alpha1.ReservedInstance{{ID: "ri", InstanceType: "m7g.large", Count: ptr.To[int32](2), EffectiveHourly: "0.0646",
			Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](100)}}},
	}
	cs, problems := commitment.Resolve(spec, commitment.Export{}, now)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	ent := map[string]float64{}
	for _, c := range cs {
		ent[c.ID] = c.Share
	}
	nodes := []commitment.Node{
		node("a m7g.xlarge on-demand"), node("b m7g.xlarge on-demand"), node("c m7g.xlarge on-demand"),
		node("d c7g.xlarge on-demand"), node("e c7g.xlarge spot"),
	}
	l := commitment.Allocate(nodes, cs, "us-east-1", ent)
	// The regional m7g.large x2 RI (8 units) covers one m7g.xlarge (8 units) whole.
	if !near(l.Used["ri"], 8) || l.By["a"][0] != "ri" {
		t.Errorf("RI used %v, a covered by %v", l.Used["ri"], l.By["a"])
	}
	// The 30 % plan before the 20 % one; it has room for exactly one m7g.xlarge.
	if l.By["b"][0] != "ec2-high" || !near(l.Covered["b"], 1) {
		t.Errorf("b covered by %v (%v)", l.By["b"], l.Covered["b"])
	}
	if l.By["c"][0] != "ec2-low" {
		t.Errorf("c covered by %v", l.By["c"])
	}
	// The Compute plan comes last, for what the family plans do not cover.
	if len(l.By["d"]) != 1 || l.By["d"][0] != "compute" {
		t.Errorf("d covered by %v", l.By["d"])
	}
	if l.Covered["e"] != 0 {
		t.Errorf("spot covered %v", l.Covered["e"])
	}
}

func TestNormalization(t *testing.T) {
	for ty, want := range map[string]float64{"m7g.large": 4, "m7g.xlarge": 8, "m7g.12xlarge": 96, "t4g.nano": 0.25, "m7g.metal": 0} {
		if got := commitment.NormalizationFactor(ty); got != want {
			t.Errorf("%s: %v, want %v", ty, got, want)
		}
	}
	cat, _ := types(t)
	ri := commitment.Commitment{ID: "ri", Kind: commitment.ReservedInstance, InstanceType: "m7g.large", EffectiveHourly: 0.0646}
	if r, _, ok := ri.Rate(cat.Types["m7g.xlarge"], 0.1632, "us-east-1", ""); !ok || !near(r, 0.1292) {
		t.Errorf("a regional m7g.large RI prices m7g.xlarge at %v %v, want 2 x 0.0646", r, ok)
	}
	zonal := ri
	zonal.Zone = "us-east-1a"
	if _, _, ok := zonal.Rate(cat.Types["m7g.xlarge"], 0.1632, "us-east-1", ""); ok {
		t.Error("a zonal RI is size-flexible")
	}
	if _, _, ok := zonal.Rate(cat.Types["m7g.large"], 0.0816, "us-east-1", "us-east-1b"); ok {
		t.Error("a zonal RI covered another zone")
	}
}

// Equal per team by default: a tenant that adds classes, labelled or not, does not enlarge
// its part.
func TestEntitlementsPerTeam(t *testing.T) {
	team := func(name, team string) commitment.Class {
		c := commitment.Class{Name: name, Labels: map[string]string{}}
		if team != "" {
			c.Labels[v1alpha1.LabelTeam] = team
		}
		return c
	}
	classes := []commitment.Class{team("a1", "a"), team("a2", "a"), team("a3", "a"), team("b1", "b"), team("lone", ""), team("lone2", ""), team("lone3", ""),
		{Name: "quiet", Labels: map[string]string{v1alpha1.LabelTeam: "b"}, Ignore: true}}
	f := commitment.Entitlements(nil, classes)
	for name, want := range map[string]float64{"a1": 1.0 / 9, "a2": 1.0 / 9, "a3": 1.0 / 9, "b1": 1.0 / 3, "lone": 1.0 / 9, "lone2": 1.0 / 9, "lone3": 1.0 / 9, "quiet": 0} {
		if !near(f[name].Of, want) {
			t.Errorf("%s: %v (%s), want %v", name, f[name].Of, f[name].Rule, want)
		}
	}
	allocs := []v1alpha1.CommitmentAllocation{{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelTeam: "a"}}, Percent: 60}}
	f = commitment.Entitlements(allocs, classes)
	for name, want := range map[string]float64{"a1": 0.2, "b1": 0.2, "lone": 0.2 / 3, "quiet": 0} {
		if !near(f[name].Of, want) {
			t.Errorf("with allocations, %s: %v (%s), want %v", name, f[name].Of, f[name].Rule, want)
		}
	}
	var sum float64
	for _, fr := range f {
		sum += fr.Of
	}
	if !near(sum, 1) {
		t.Errorf("the fractions add up to %v", sum)
	}
}

func TestResolveLeavesOutWhatCannotPrice(t *testing.T) {
	past := metav1.NewTime(now.Add(-time.Hour))
	spec := &v1alpha1.Commitments{
		SavingsPlans: []v1alpha1.SavingsPlan{
			{ID: "old", Type: v1alpha1.SavingsPlanCompute, End: &past, Share: v1alpha1.CommitmentShare{Hourly: "1"}},
			{ID: "bare", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](10)}},
			{ID: "notype", Commitment: "2.00", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](10)}},
			{ID: "nocommit", Type: v1alpha1.SavingsPlanCompute, Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](10)}},
		},
		ReservedInstances: []v1alpha1.ReservedInstance{{ID: "ri", InstanceType: "m7g.large", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](10)}}},
	}
	cs, problems := commitment.Resolve(spec, commitment.Export{}, now)
	if len(cs) != 0 {
		t.Errorf("resolved %v", cs)
	}
	want := []string{
		"spec.commitments.savingsPlans[0].end: 2026-12-02T09:00:00Z is past",
		"spec.commitments.savingsPlans[1].id: bare has no facts in the Baseline or the signals' commitments.json",
		"spec.commitments.savingsPlans[2].type: Savings Plan notype has no type (Compute or EC2Instance)",
		"spec.commitments.savingsPlans[3].share: share.percent needs the plan's commitment",
		"spec.commitments.reservedInstances[0]: Reserved Instance ri needs instanceType, count and share.percent",
	}
	if len(problems) != len(want) {
		t.Fatalf("problems %v", problems)
	}
	for i, w := range want {
		if !strings.HasPrefix(problems[i].Message, w) {
			t.Errorf("problem %d: %q, want %q", i, problems[i].Message, w)
		}
	}
	if problems[0].Reason != commitment.ReasonExpired || problems[1].Reason != commitment.ReasonUnresolved {
		t.Errorf("reasons %s %s", problems[0].Reason, problems[1].Reason)
	}
}

func TestMoneyAndPercent(t *testing.T) {
	for s, ok := range map[string]bool{"12.50": true, "0": false, "-1": false, "5000.01": false, "1e2": false, "abc": false} {
		if _, err := commitment.Dollars(s); (err == nil) != ok {
			t.Errorf("Dollars(%q): %v", s, err)
		}
	}
	for s, ok := range map[string]bool{"31%": true, "27.5%": true, "0%": true, "100%": false, "-5%": false, "31": false} {
		if _, err := commitment.Percent(s); (err == nil) != ok {
			t.Errorf("Percent(%q): %v", s, err)
		}
	}
}

// The docs' batch of six m7g.xlarge against api's $0.60/h: five covered whole, the sixth
// for 32.8 % of its hour, so the class's effective cost is $0.60 + 0.671782 x 0.1632 =
// $0.709635/h; with five, $0.036960/h of the entitlement is paid and unused.
func TestEffectiveAndUnused(t *testing.T) {
	cat, node := types(t)
	cs, _ := commitment.Resolve(workedExample(), commitment.Export{}, now)
	ent := map[string]float64{cs[0].ID: 0.60}
	var nodes []commitment.Node
	for i := range 6 {
		nodes = append(nodes, node(fmt.Sprintf("n%d m7g.xlarge on-demand", i)))
	}
	nodes = append(nodes, node("s c7g.xlarge spot"))
	l := commitment.Allocate(nodes, cs, "us-east-1", ent)
	total := 0.0
	for _, n := range nodes[:6] {
		total += l.Effective(n.Name, 0.1632)
	}
	if fmt.Sprintf("%.6f", total) != "0.709635" {
		t.Errorf("effective of the batch = %.6f, want 0.709635", total)
	}
	if e := l.Effective("s", 0.0551); !near(e, 0.0551) {
		t.Errorf("a spot node's effective price %v, want its list 0.0551", e)
	}
	if u := l.Unused(cs, ent, cat, "us-east-1"); !near(u, 0) {
		t.Errorf("unused with six nodes = %v, want 0", u)
	}
	l = commitment.Allocate(nodes[:5], cs, "us-east-1", ent)
	if u := l.Unused(cs, ent, cat, "us-east-1"); !near(u, 0.03696) {
		t.Errorf("unused with five nodes = %v, want 0.03696", u)
	}
	// A Reserved Instance's unused units are priced at its rate per unit: 8 units of an
	// m7g.large x2 RI at $0.0646/h an instance (4 units) are $0.1292/h.
	ri := []commitment.Commitment{{ID: "ri", Kind: commitment.ReservedInstance, InstanceType: "m7g.large", EffectiveHourly: 0.0646, Share: 8}}
	if u := commitment.Allocate(nil, ri, "us-east-1", map[string]float64{"ri": 8}).Unused(ri, map[string]float64{"ri": 8}, cat, "us-east-1"); !near(u, 0.1292) {
		t.Errorf("an unused RI = %v, want 0.1292", u)
	}
}
