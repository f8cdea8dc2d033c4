package render_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/render"
)

var commitmentNow = time.Date(2026, 12, 2, 10, 2, 0, 0, time.UTC)

// workedExampleClass is docs/commitments.md's class api.
func workedExampleClass(mutate ...func(*v1alpha1.WorkloadClass)) *v1alpha1.WorkloadClass {
	wc := class("api", v1alpha1.ProfileGeneral, withArchitectures(v1alpha1.ArchitectureARM64),
		withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand), withTypes("m7g.xlarge", "c7g.xlarge"))
	wc.Labels = map[string]string{"team": "api"}
	for _, m := range mutate {
		m(wc)
	}
	return wc
}

// workedExamplePlan is its Savings Plan: EC2Instance m7g us-east-1, $3.00/h, 31 % off m7g,
// share 40 %, half of it for team api.
func workedExamplePlan(discount string) func(*v1alpha1.Baseline) {
	return func(b *v1alpha1.Baseline) {
		b.Spec.Commitments = &v1alpha1.Commitments{
			SavingsPlans: []v1alpha1.SavingsPlan{{
				ID: "sp-0a1b2c3d", Type: v1alpha1.SavingsPlanEC2Instance, Commitment: "3.00", Family: "m7g", Region: "us-east-1",
				Discount: &v1alpha1.Discount{Families: []v1alpha1.FamilyDiscount{{Family: "m7g", Discount: discount}}},
				Share:    v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)},
			}},
			Allocations: []v1alpha1.CommitmentAllocation{{ClassSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "api"}}, Percent: 50}},
		}
	}
}

func state(open bool) render.CommitmentOptions {
	return render.CommitmentOptions{Now: commitmentNow,
		States:       map[string]commitment.State{"sp-0a1b2c3d": {Open: open, Since: commitmentNow}},
		Entitlements: map[string]float64{"sp-0a1b2c3d": 0.60}}
}

func weightsOf(t *testing.T, res *render.Result) string {
	t.Helper()
	var out []string
	for _, r := range res.Rungs {
		out = append(out, fmt.Sprintf("%s=%d", r.Name, r.Weight))
	}
	return strings.Join(out, " ")
}

// The worked example of docs/commitments.md, §5: without the plan the weights follow the
// list prices; with it, Open, the on-demand m7g rung ranks first at a marginal $0 (its
// effective price $0.028152/vCPU-h); Exhausted, the order is the one without the plan.
func TestCommitmentsWorkedExample(t *testing.T) {
	const without = "api-spot-arm64-m7g-xlarge=99 api-spot-arm64-c7g-xlarge=100 api-on-demand-arm64-m7g-xlarge=97 api-on-demand-arm64-c7g-xlarge=98"
	const open = "api-spot-arm64-m7g-xlarge=98 api-spot-arm64-c7g-xlarge=99 api-on-demand-arm64-m7g-xlarge=100 api-on-demand-arm64-c7g-xlarge=97"
	cases := []struct {
		name    string
		b       *v1alpha1.Baseline
		wc      *v1alpha1.WorkloadClass
		opts    render.CommitmentOptions
		weights string
	}{
		{"without the plan", baseline(), workedExampleClass(), render.CommitmentOptions{Now: commitmentNow}, without},
		{"offline (Open)", baseline(workedExamplePlan("31%")), workedExampleClass(), render.CommitmentOptions{Now: commitmentNow, Offline: true}, open},
		{"no coverage known (rebalance)", baseline(workedExamplePlan("31%")), workedExampleClass(), render.CommitmentOptions{Now: commitmentNow}, without},
		{"Open", baseline(workedExamplePlan("31%")), workedExampleClass(), state(true), open},
		{"Exhausted", baseline(workedExamplePlan("31%")), workedExampleClass(), state(false), without},
		{"class ignores commitments", baseline(workedExamplePlan("31%")), workedExampleClass(func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Commitments: v1alpha1.CommitmentsIgnore}
		}), state(true), without},
	}
	var lines []string
	for _, c := range cases {
		res, err := render.Render(c.b, c.wc, render.Options{Commitments: c.opts})
		if err != nil {
			t.Fatal(err)
		}
		if got := weightsOf(t, res); got != c.weights {
			t.Errorf("%s: weights\n %s\nwant\n %s", c.name, got, c.weights)
		}
		for i, r := range res.Rungs {
			policy := res.NodePools[i].Spec.Disruption.ConsolidationPolicy
			lines = append(lines, fmt.Sprintf("%s\t%s\t%d\t%s\t%s", c.name, r.Name, r.Weight, policy, r.WeightReason))
		}
		for _, f := range res.Settings.Fields {
			if strings.Contains(f.Path, "commitments") {
				lines = append(lines, fmt.Sprintf("%s\t%s\t%s\t%s", c.name, f.Path, f.Value, f.Origin))
			}
		}
	}
	// The reason states the effective price the example computes: 0.1632 x 0.69 / 4.
	res, _ := render.Render(baseline(workedExamplePlan("31%")), workedExampleClass(), render.Options{Commitments: state(true)})
	for _, r := range res.Rungs {
		if r.Name == "api-on-demand-arm64-m7g-xlarge" {
			for _, want := range []string{"$0.0000/vCPU-h on-demand marginal", "Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1) has room for class api (entitlement $0.6000/h, Open since 10:02)", "effective $0.0282/vCPU-h (31 % off $0.0408, baseline:discount.families)"} {
				if !strings.Contains(r.WeightReason, want) {
					t.Errorf("the covered rung's reason lacks %q:\n%s", want, r.WeightReason)
				}
			}
			if r.Commitment != "sp-0a1b2c3d" {
				t.Errorf("the covered rung's commitment = %q", r.Commitment)
			}
		} else if r.Commitment != "" || strings.Contains(r.WeightReason, "sp-0a1b2c3d") {
			t.Errorf("%s names the commitment: %s", r.Name, r.WeightReason)
		}
	}
	golden(t, "commitments.txt", strings.Join(lines, "\n")+"\n")
}

// golden compares got with testdata/golden/name (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs; run go test ./internal/render -update and review:\n%s", path, got)
	}
}

// A rung's cached price spells out the commitments that priced it: two discounts give two
// effective prices, and the Exhausted render between them does not leak into the Open one.
func TestCommitmentsEnterTheRungPriceKey(t *testing.T) {
	reason := func(discount string, open bool) string {
		res, err := render.Render(baseline(workedExamplePlan(discount)), workedExampleClass(), render.Options{Commitments: state(open)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rungs {
			if r.Name == "api-on-demand-arm64-m7g-xlarge" {
				return r.WeightReason
			}
		}
		t.Fatal("no m7g on-demand rung")
		return ""
	}
	a, exhausted, b, again := reason("31%", true), reason("31%", false), reason("20%", true), reason("31%", true)
	if !strings.Contains(a, "effective $0.0282") || !strings.Contains(b, "effective $0.0326") {
		t.Errorf("the two discounts share a price:\n%s\n%s", a, b)
	}
	if strings.Contains(exhausted, "sp-0a1b2c3d") || !strings.Contains(exhausted, "$0.0408/vCPU-h on-demand") {
		t.Errorf("Exhausted is still priced by the plan: %s", exhausted)
	}
	if again != a {
		t.Errorf("the same inputs priced differently after other renders:\n%s\n%s", a, again)
	}
}

// A reserved rung ranks first under every strategy, Static included.
func TestReservedRungRanksFirstUnderEveryStrategy(t *testing.T) {
	for _, s := range []v1alpha1.WeightingStrategy{v1alpha1.WeightingStatic, v1alpha1.WeightingCost, v1alpha1.WeightingRiskAdjustedCost} {
		wc := class("res", v1alpha1.ProfileGeneral, withArchitectures(v1alpha1.ArchitectureARM64),
			withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved))
		wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: s}
		res, err := render.Render(baseline(workedExamplePlan("31%")), wc, render.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rungs {
			if (r.CapacityType == v1alpha1.CapacityTypeReserved) != (r.Weight == 100) {
				t.Errorf("%s: %s has weight %d (%s)", s, r.Name, r.Weight, r.WeightReason)
			}
		}
	}
}

// A rung whose every type a declared commitment covers consolidates only when empty,
// whatever the state (so it never flips); a Diverse rung the plan covers in part does not.
func TestCoveredRungsConsolidateOnlyWhenEmpty(t *testing.T) {
	policies := func(b *v1alpha1.Baseline, wc *v1alpha1.WorkloadClass, opts render.CommitmentOptions) map[string]string {
		res, err := render.Render(b, wc, render.Options{Commitments: opts})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, np := range res.NodePools {
			out[np.Name] = string(np.Spec.Disruption.ConsolidationPolicy)
		}
		for _, f := range res.Provenance {
			if f.Path == "spec.disruption.consolidationPolicy" && strings.Contains(string(f.Origin), "commitment") {
				out[strings.TrimPrefix(f.Object, "NodePool/")+" origin"] = string(f.Origin)
			}
		}
		return out
	}
	for _, open := range []bool{true, false} {
		got := policies(baseline(workedExamplePlan("31%")), workedExampleClass(), state(open))
		if got["api-on-demand-arm64-m7g-xlarge"] != string(karpv1.ConsolidationPolicyWhenEmpty) ||
			got["api-on-demand-arm64-m7g-xlarge origin"] != "computed:commitment sp-0a1b2c3d (covered nodes are paid for; Karpenter compares list prices)" {
			t.Errorf("open=%v: the covered rung: %v", open, got)
		}
		for _, other := range []string{"api-on-demand-arm64-c7g-xlarge", "api-spot-arm64-m7g-xlarge"} {
			if got[other] != string(karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized) {
				t.Errorf("open=%v: %s: %s", open, other, got[other])
			}
		}
	}
	diverse := class("mixed", v1alpha1.ProfileGeneral, withArchitectures(v1alpha1.ArchitectureARM64), withCapacityTypes(v1alpha1.CapacityTypeOnDemand))
	if got := policies(baseline(workedExamplePlan("31%")), diverse, render.CommitmentOptions{Offline: true}); got["mixed-on-demand-arm64"] != string(karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized) {
		t.Errorf("a Diverse rung the m7g plan covers in part: %v", got)
	}
	compute := func(b *v1alpha1.Baseline) {
		b.Spec.Commitments = &v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{{ID: "sp-compute", Type: v1alpha1.SavingsPlanCompute,
			Discount: &v1alpha1.Discount{Default: "20%"}, Share: v1alpha1.CommitmentShare{Hourly: "2"}}}}
	}
	if got := policies(baseline(compute), diverse, render.CommitmentOptions{Offline: true}); got["mixed-on-demand-arm64"] != string(karpv1.ConsolidationPolicyWhenEmpty) {
		t.Errorf("a Compute plan covers every on-demand type: %v", got)
	}
}

// Settings name each commitment with its state's origin, the class's use, and what was
// left out with the field.
func TestCommitmentSettings(t *testing.T) {
	past := metav1.NewTime(commitmentNow.Add(-time.Hour))
	b := baseline(workedExamplePlan("31%"), func(b *v1alpha1.Baseline) {
		b.Spec.Commitments.SavingsPlans = append(b.Spec.Commitments.SavingsPlans, v1alpha1.SavingsPlan{ID: "sp-old",
			Type: v1alpha1.SavingsPlanCompute, End: &past, Share: v1alpha1.CommitmentShare{Hourly: "1"}})
	})
	res, err := render.Render(b, workedExampleClass(), render.Options{Commitments: render.CommitmentOptions{Now: commitmentNow, Offline: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"spec.weighting.commitments": "Use\tpoolsmith-default",
		"commitments[sp-0a1b2c3d]":   "Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1), share $1.2000/h: Open\tcomputed:commitments (offline: no nodes known, every plan has room)",
		"commitments[sp-old]":        "left out: spec.commitments.savingsPlans[1].end: 2026-12-02T09:02:00Z is past\tcomputed:commitment Expired",
	}
	for _, f := range res.Settings.Fields {
		if w, ok := want[f.Path]; ok {
			if got := f.Value + "\t" + string(f.Origin); got != w {
				t.Errorf("%s = %q, want %q", f.Path, got, w)
			}
			delete(want, f.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing settings %v", want)
	}
	if len(res.Settings.Commitments.Open) != 1 || len(res.Settings.Commitments.LeftOut) != 1 {
		t.Errorf("commitments = %+v", res.Settings.Commitments)
	}
}

// The hysteresis's node is what the worked example's next node draws: one m7g.xlarge at
// 0.1632 x 0.69 = $0.112608/h, whatever the state; none for a class that ignores the plan
// or a plan that prices none of its rungs.
func TestCommitmentNodes(t *testing.T) {
	for _, opts := range []render.CommitmentOptions{{Now: commitmentNow}, state(false), state(true)} {
		nodes, err := render.CommitmentNodes(render.Inputs{Class: workedExampleClass(), Baseline: baseline(workedExamplePlan("31%")), Options: render.Options{Commitments: opts}})
		if err != nil {
			t.Fatal(err)
		}
		if got := nodes["sp-0a1b2c3d"]; fmt.Sprintf("%.6f", got) != "0.112608" || len(nodes) != 1 {
			t.Errorf("nodes %v, want sp-0a1b2c3d: 0.112608", nodes)
		}
	}
	ignore := workedExampleClass(func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Weighting = &v1alpha1.Weighting{Commitments: v1alpha1.CommitmentsIgnore}
	})
	other := workedExampleClass(withTypes("c7g.xlarge"))
	for _, wc := range []*v1alpha1.WorkloadClass{ignore, other} {
		nodes, err := render.CommitmentNodes(render.Inputs{Class: wc, Baseline: baseline(workedExamplePlan("31%")), Options: render.Options{Commitments: commitmentOptionsNow()}})
		if err != nil || len(nodes) != 0 {
			t.Errorf("%v: nodes %v, err %v, want none", wc.Spec.Instances, nodes, err)
		}
	}
}

func commitmentOptionsNow() render.CommitmentOptions {
	return render.CommitmentOptions{Now: commitmentNow}
}
