package render_test

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/render"
)

// testCatalog has two families a type each: fa1 is cheaper but interrupted >20% of the
// time, fb1 a little dearer and interrupted <5%.
func testCatalog(t *testing.T, extra string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse(`# test catalog
type	fa1.large	fa1	fa	1	large	amd64	2	4096	0	-	-	0	0
type	fb1.large	fb1	fb	1	large	amd64	2	4096	0	-	-	0	0
price	us-east-1	fa1.large	0.1	0.019	0.02	4
price	us-east-1	fb1.large	0.1	0.021	0.022	0
` + extra)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func weights(t *testing.T, cat *catalog.Catalog, region string, mutate ...func(*v1alpha1.WorkloadClass)) map[string]int32 {
	t.Helper()
	wc := class("w", v1alpha1.ProfileGeneral, append([]func(*v1alpha1.WorkloadClass){
		withTypes("fa1.large", "fb1.large"), withArchitectures(v1alpha1.ArchitectureAMD64), withCapacityTypes(v1alpha1.CapacityTypeSpot),
	}, mutate...)...)
	res, err := render.Render(baseline(), wc, render.Options{Catalog: cat, Region: region})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, r := range res.Rungs {
		out[r.Slice] = r.Weight
		if r.WeightReason == "" {
			t.Errorf("rung %s has no weight reason", r.Name)
		}
	}
	return out
}

func strategy(s v1alpha1.WeightingStrategy) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		if wc.Spec.Weighting == nil {
			wc.Spec.Weighting = &v1alpha1.Weighting{}
		}
		wc.Spec.Weighting.Strategy = s
	}
}

func TestRiskAdjustedCostRanksAStableTypeAboveACheaperFlakyOne(t *testing.T) {
	cat := testCatalog(t, "")
	cost := weights(t, cat, "us-east-1", strategy(v1alpha1.WeightingCost))
	if cost["fa1.large"] <= cost["fb1.large"] {
		t.Errorf("Cost: the cheaper type must rank first, got %v", cost)
	}
	risk := weights(t, cat, "us-east-1") // RiskAdjustedCost is the default
	if risk["fb1.large"] <= risk["fa1.large"] {
		t.Errorf("RiskAdjustedCost: the stable type must rank first at a 10%% price difference, got %v", risk)
	}
	static := weights(t, cat, "us-east-1", strategy(v1alpha1.WeightingStatic))
	if static["fa1.large"] != 100 || static["fb1.large"] != 99 {
		t.Errorf("Static keeps the order the class gives, got %v", static)
	}
}

func TestMissingRegionGivesNeutralWeights(t *testing.T) {
	wc := class("w", v1alpha1.ProfileGeneral, withTypes("fa1.large", "fb1.large"), withArchitectures(v1alpha1.ArchitectureAMD64), withCapacityTypes(v1alpha1.CapacityTypeSpot))
	res, err := render.Render(baseline(), wc, render.Options{Catalog: testCatalog(t, ""), Region: "ap-south-9"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rungs[0].Weight != 100 || res.Rungs[1].Weight != 99 || !strings.Contains(res.Rungs[0].WeightReason, "no prices for ap-south-9") {
		t.Errorf("rungs = %+v", res.Rungs)
	}
}

func TestCostPerPodHourCountsPodsAfterOverhead(t *testing.T) {
	// fc1: 2 vCPU for $0.10 ($0.05/vCPU) holds one 1-CPU pod after kube-reserved;
	// fd1: 4 vCPU for $0.22 ($0.055/vCPU) holds three: $0.073/pod.
	cat := testCatalog(t, `type	fc1.large	fc1	fc	1	large	amd64	2	8192	0	-	-	0	0
type	fd1.xlarge	fd1	fd	1	xlarge	amd64	4	16384	0	-	-	0	0
price	us-east-1	fc1.large	0.1	0	0	-
price	us-east-1	fd1.xlarge	0.22	0	0	-
`)
	render := func(shape *v1alpha1.PodShape) map[string]int32 {
		return weights(t, cat, "us-east-1", withTypes("fc1.large", "fd1.xlarge"), withCapacityTypes(v1alpha1.CapacityTypeOnDemand), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingCost, PodShape: shape}
		})
	}
	if w := render(nil); w["fc1.large"] <= w["fd1.xlarge"] {
		t.Errorf("per vCPU the 2-vCPU type is cheaper: %v", w)
	}
	if w := render(&v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("1"))}); w["fd1.xlarge"] <= w["fc1.large"] {
		t.Errorf("per pod-hour the 4-vCPU type is cheaper: %v", w)
	}
	if w := render(&v1alpha1.PodShape{Memory: ptr.To(resource.MustParse("64Gi"))}); w["fc1.large"] != 100 || w["fd1.xlarge"] != 99 {
		// Neither type fits a 64Gi pod: no price, preference order kept.
		t.Errorf("unfit pod shape: %v", w)
	}
}

// TestGoldenWeights records each sample's weights and reasons under each strategy in
// testdata/golden/weights.txt; -update rewrites it.
func TestGoldenWeights(t *testing.T) {
	classes, b := goldenInputs(t)
	var lines []string
	for name, wc := range classes {
		if !strings.HasPrefix(name, "sample-") {
			continue
		}
		for _, s := range []v1alpha1.WeightingStrategy{v1alpha1.WeightingStatic, v1alpha1.WeightingCost, v1alpha1.WeightingRiskAdjustedCost} {
			wc := wc.DeepCopy()
			strategy(s)(wc)
			res, err := render.Render(b, wc, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Rungs {
				lines = append(lines, fmt.Sprintf("%s\t%s\t%s\t%d\t%s", wc.Name, s, r.Name, r.Weight, r.WeightReason))
			}
		}
	}
	sort.Strings(lines)
	golden(t, "weights.txt", strings.Join(lines, "\n")+"\n")
}

// withSpotDiscount returns cat with the us-east-1 spot price of the named types or
// families set to on-demand x (1 - discount).
func withSpotDiscount(cat *catalog.Catalog, discount float64, names ...string) *catalog.Catalog {
	out := &catalog.Catalog{Types: cat.Types, Prices: map[string]map[string]catalog.Price{}, Dates: cat.Dates}
	for r, p := range cat.Prices {
		out.Prices[r] = p
	}
	region := map[string]catalog.Price{}
	for name, p := range cat.Prices["us-east-1"] {
		for _, n := range names {
			if (name == n || cat.Types[name].Family == n) && p.SpotAvg > 0 {
				p.SpotAvg, p.SpotMin = p.OnDemand*(1-discount), p.OnDemand*(1-discount)
			}
		}
		region[name] = p
	}
	out.Prices["us-east-1"] = region
	return out
}

var unitPrice = regexp.MustCompile(`\$([0-9.]+)/`)

// rungPrices renders the sample general class under Cost and returns each rung's price
// as its weight reason states it, and its weight.
func rungPrices(t *testing.T, cat *catalog.Catalog) (map[string]float64, map[string]int32) {
	t.Helper()
	classes, b := goldenInputs(t)
	wc := classes["sample-general"].DeepCopy()
	strategy(v1alpha1.WeightingCost)(wc)
	res, err := render.Render(b, wc, render.Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	prices, weights := map[string]float64{}, map[string]int32{}
	for _, r := range res.Rungs {
		m := unitPrice.FindStringSubmatch(r.WeightReason)
		if m == nil {
			t.Fatalf("%s: no price in %q", r.Name, r.WeightReason)
		}
		prices[r.Name], _ = strconv.ParseFloat(m[1], 64)
		weights[r.Name] = r.Weight
	}
	return prices, weights
}

// TestOneOddTypeCannotSwingARung: a single type whose spot price is 95% off (c7g.large,
// normally about 60%) moves the general-spot-arm64 rung's price by a few percent at most
// (the mean of its 3 cheapest types fell 66%), and no weight changes.
func TestOneOddTypeCannotSwingARung(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	before, weightsBefore := rungPrices(t, cat)
	after, weightsAfter := rungPrices(t, withSpotDiscount(cat, 0.95, "c7g.large"))
	if b, a := before["general-spot-arm64"], after["general-spot-arm64"]; math.Abs(a-b)/b > 0.05 {
		t.Errorf("one odd type moved general-spot-arm64 from $%.4f to $%.4f", b, a)
	}
	if fmt.Sprint(weightsBefore) != fmt.Sprint(weightsAfter) {
		t.Errorf("one odd type changed the weights: %v -> %v", weightsBefore, weightsAfter)
	}
	// Putting c8gd, m8gd and r8gd (12 sizes each, 89% off) at their categories' median
	// discounts moves the rung by a fraction of what it moved the old mean of 3 (+71%).
	fixed, _ := rungPrices(t, withSpotDiscount(cat, 0.65, "c8gd", "m8gd", "r8gd"))
	if b, a := before["general-spot-arm64"], fixed["general-spot-arm64"]; (a-b)/b > 0.25 {
		t.Errorf("the three odd families moved general-spot-arm64 from $%.4f to $%.4f", b, a)
	}
}

// TestPriceSourcesAreNamed: every cost-ranked rung names where its prices came from.
func TestPriceSourcesAreNamed(t *testing.T) {
	classes, b := goldenInputs(t)
	res, err := render.Render(b, classes["sample-general"], render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rungs {
		if !strings.Contains(r.WeightReason, "(catalog 2025-05-28)") || r.PriceSources != string(r.CapacityType)+": catalog 2025-05-28 (60)" {
			t.Errorf("%s: reason %q, sources %q", r.Name, r.WeightReason, r.PriceSources)
		}
	}
}

// TestRendersSharingACatalogPriceEachRungByItsOwnInputs renders classes that differ in
// every input of a rung's price one after another against one catalog (which keeps each
// rung's price for the next render), and each alone against a fresh catalog: the weights,
// their reasons and price sources must be the same.
func TestRendersSharingACatalogPriceEachRungByItsOwnInputs(t *testing.T) {
	extra := `type	fc1.large	fc1	fc	1	large	arm64	2	8192	0	-	-	0	0
type	fd1.xlarge	fd1	fd	1	xlarge	amd64	4	16384	0	-	-	0	0
price	us-east-1	fc1.large	0.1	0.03	0.03	2
price	us-east-1	fd1.xlarge	0.22	0.05	0.06	1
price	eu-west-1	fa1.large	0.3	0.01	0.02	0
price	eu-west-1	fd1.xlarge	0.2	0.05	0.06	4
`
	all := []string{"fa1.large", "fb1.large", "fc1.large", "fd1.xlarge"}
	variants := map[string][]func(*v1alpha1.WorkloadClass){
		"default":   {withTypes(all...)},
		"cost":      {withTypes(all...), strategy(v1alpha1.WeightingCost)},
		"on-demand": {withTypes(all...), withCapacityTypes(v1alpha1.CapacityTypeOnDemand)},
		"arm":       {withTypes(all...), withArchitectures(v1alpha1.ArchitectureARM64)},
		"two types": {withTypes("fa1.large", "fd1.xlarge")},
		"pod shape": {withTypes(all...), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingCost, PodShape: &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("1"))}}
		}},
		"bigger pods": {withTypes(all...), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingCost, PodShape: &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("1500m"))}}
		}},
	}
	profiles := []v1alpha1.Profile{v1alpha1.ProfileGeneral, v1alpha1.ProfileMemoryOptimized}
	summary := func(cat *catalog.Catalog, region string, profile v1alpha1.Profile, mutate []func(*v1alpha1.WorkloadClass)) string {
		res, err := render.Render(baseline(), class("w", profile, mutate...), render.Options{Catalog: cat, Region: region})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, r := range res.Rungs {
			fmt.Fprintf(&b, "%s %d %s %s\n", r.Name, r.Weight, r.WeightReason, r.PriceSources)
		}
		return b.String()
	}
	shared := testCatalog(t, extra)
	names := slices.Sorted(maps.Keys(variants))
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		for _, profile := range profiles {
			for _, name := range names {
				got := summary(shared, region, profile, variants[name])
				want := summary(testCatalog(t, extra), region, profile, variants[name])
				if got != want {
					t.Errorf("%s, %s, %s: rendered after other classes against the same catalog:\n%s\nalone:\n%s", region, profile, name, got, want)
				}
			}
		}
	}
}

// TestMoneyInStatusIsBounded: a rung's reason prints money to a hundredth of a cent, and a
// price of any size (here one that reached the catalog past the signals' ceiling) as a few
// characters, never as the 309 digits of 1.7e308.
func TestMoneyInStatusIsBounded(t *testing.T) {
	for v, want := range map[float64]string{0.013642: "$0.0136", 360.987: "$360.9870", 1.7e308: "$1.7e+308", math.Inf(1): "$+Inf", math.NaN(): "$NaN"} {
		if got := render.USD(v); got != want {
			t.Errorf("USD(%g) = %q, want %q", v, got, want)
		}
	}
	cat := testCatalog(t, "type\tfe1.large\tfe1\tfe\t1\tlarge\tamd64\t2\t4096\t0\t-\t-\t0\t0\nprice\tus-east-1\tfe1.large\t1e308\t1.7e308\t1.7e308\t0\n")
	wc := class("w", v1alpha1.ProfileGeneral, withTypes("fe1.large"), withArchitectures(v1alpha1.ArchitectureAMD64), withCapacityTypes(v1alpha1.CapacityTypeSpot))
	res, err := render.Render(baseline(), wc, render.Options{Catalog: cat, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	reason := res.Rungs[0].WeightReason
	if !strings.Contains(reason, "$8.5e+307/vCPU-h spot") || regexp.MustCompile(`\d{12}`).MatchString(reason) {
		t.Errorf("reason = %q", reason)
	}
}
