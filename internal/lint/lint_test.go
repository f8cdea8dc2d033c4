package lint_test

import (
	"fmt"
	"strings"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/render"
)

func baseline() *v1alpha1.Baseline {
	return &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineSpec{NodeClass: awsv1.EC2NodeClassSpec{
			Role:                       "r",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-1"}},
		}},
	}
}

func rendered(t *testing.T, wc *v1alpha1.WorkloadClass) lint.Class {
	t.Helper()
	b := baseline()
	res, err := render.Render(b, wc, render.Options{})
	return lint.Class{Class: wc, Baseline: b, Result: res, Err: err}
}

func class(name string, spec v1alpha1.WorkloadClassSpec) *v1alpha1.WorkloadClass {
	return &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func has(findings []lint.Finding, sev lint.Severity, object, check string) bool {
	for _, f := range findings {
		if f.Severity == sev && f.Object == object && f.Check == check {
			return true
		}
	}
	return false
}

func TestRungOverlapAndNameCollision(t *testing.T) {
	c := rendered(t, class("web", v1alpha1.WorkloadClassSpec{CapacityTypes: []v1alpha1.CapacityType{"spot", "on-demand"}}))
	// Make the on-demand rungs spot too: a hand edit that would let a node match two rungs.
	for _, np := range c.Result.NodePools {
		np.Spec.Template.Spec.Requirements[0].Values = []string{"spot"}
	}
	other := rendered(t, class("api", v1alpha1.WorkloadClassSpec{}))
	other.Result.NodePools[0].Name = c.Result.NodePools[0].Name
	findings := lint.Lint([]lint.Class{c, other}, render.Options{})
	if !has(findings, lint.Error, "WorkloadClass/web", lint.CheckRungOverlap) {
		t.Errorf("no rung overlap in %v", findings)
	}
	if !has(findings, lint.Error, "NodePool/"+c.Result.NodePools[0].Name, lint.CheckNameCollision) {
		t.Errorf("no name collision in %v", findings)
	}
	if !lint.HasErrors(findings) {
		t.Error("HasErrors = false")
	}
}

func TestClassOverlapNeedsSharedPodsAndSharedBand(t *testing.T) {
	web := rendered(t, class("web", v1alpha1.WorkloadClassSpec{}))
	apart := rendered(t, class("batch", v1alpha1.WorkloadClassSpec{Weighting: &v1alpha1.Weighting{Ceiling: ptr.To[int32](50)}}))
	tainted := rendered(t, class("tainted", v1alpha1.WorkloadClassSpec{Taints: v1alpha1.Taints{{Key: "x/y", Effect: corev1.TaintEffectNoSchedule}}}))
	amd := rendered(t, class("amd", v1alpha1.WorkloadClassSpec{Architectures: []v1alpha1.Architecture{"amd64"}, CapacityTypes: []v1alpha1.CapacityType{"on-demand"}}))
	if f := lint.Lint([]lint.Class{web, apart, tainted}, render.Options{}); has(f, lint.Warning, "WorkloadClass/batch", lint.CheckClassOverlap) || has(f, lint.Warning, "WorkloadClass/tainted", lint.CheckClassOverlap) || has(f, lint.Warning, "WorkloadClass/web", lint.CheckClassOverlap) {
		t.Errorf("separate bands or a distinguishing taint still reported: %v", f)
	}
	if f := lint.Lint([]lint.Class{web, amd}, render.Options{}); !has(f, lint.Warning, "WorkloadClass/web", lint.CheckClassOverlap) {
		t.Errorf("overlapping band not reported: %v", f)
	}
}

func TestGPUAndFallbackChecks(t *testing.T) {
	gpu := rendered(t, class("gpu", v1alpha1.WorkloadClassSpec{Profile: v1alpha1.ProfileGPU}))
	for _, np := range gpu.Result.NodePools {
		np.Spec.Template.Spec.Taints = nil
	}
	general := rendered(t, class("gen", v1alpha1.WorkloadClassSpec{}))
	graced := rendered(t, class("graced", v1alpha1.WorkloadClassSpec{TerminationGracePeriod: &metav1.Duration{Duration: 3600e9}}))
	findings := lint.Lint([]lint.Class{gpu, general, graced}, render.Options{})
	if !has(findings, lint.Warning, "WorkloadClass/gpu", lint.CheckGPUUntainted) {
		t.Errorf("untainted GPU class not reported: %v", findings)
	}
	if !has(findings, lint.Warning, "WorkloadClass/gen", lint.CheckFallbackWithoutTGP) || has(findings, lint.Warning, "WorkloadClass/graced", lint.CheckFallbackWithoutTGP) {
		t.Errorf("fallback grace-period check wrong: %v", findings)
	}
}

func TestSelectsNothing(t *testing.T) {
	reserved := rendered(t, class("res", v1alpha1.WorkloadClassSpec{CapacityTypes: []v1alpha1.CapacityType{"reserved"}}))
	old := rendered(t, class("old", v1alpha1.WorkloadClassSpec{
		Instances: &v1alpha1.InstanceShape{Families: []string{"m5"}, MinGeneration: ptr.To[int32](6)},
	}))
	findings := lint.Lint([]lint.Class{reserved, old}, render.Options{})
	if !has(findings, lint.Error, "NodePool/res-reserved-arm64", lint.CheckSelectsNothing) {
		t.Errorf("reserved without reservations not reported: %v", findings)
	}
	var msg string
	for _, f := range findings {
		if f.Object == "NodePool/old-spot-amd64" && f.Check == lint.CheckSelectsNothing {
			msg = f.Message
		}
	}
	if !strings.Contains(msg, "generation 5 is below the floor") {
		t.Errorf("m5 under a generation floor of 6: %q in %v", msg, findings)
	}
}

func TestRenderErrorsBecomeFindings(t *testing.T) {
	bad := rendered(t, class("bad", v1alpha1.WorkloadClassSpec{Consistency: v1alpha1.ConsistencyType,
		Instances: &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Min: ptr.To[int32](5000)}}}))
	if f := lint.Lint([]lint.Class{bad}, render.Options{}); !has(f, lint.Error, "WorkloadClass/bad", lint.CheckInvalidSpec) {
		t.Errorf("render error not reported: %v", f)
	}
}

func TestCatalogBackedChecks(t *testing.T) {
	huge := rendered(t, class("huge", v1alpha1.WorkloadClassSpec{Instances: &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Min: ptr.To[int32](5000)}}}))
	named := rendered(t, class("named", v1alpha1.WorkloadClassSpec{
		Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64},
		Instances:     &v1alpha1.InstanceShape{Families: []string{"m7g", "m7i", "zz9"}},
	}))
	findings := lint.Lint([]lint.Class{huge, named}, render.Options{})
	if !has(findings, lint.Error, "NodePool/huge-spot-arm64", lint.CheckSelectsNothing) {
		t.Errorf("a shape no type satisfies is not reported: %v", findings)
	}
	if !has(findings, lint.Warning, "WorkloadClass/named", lint.CheckSliceArch) || !has(findings, lint.Warning, "WorkloadClass/named", lint.CheckUnknownSlice) {
		t.Errorf("family checks missing: %v", findings)
	}
	if has(findings, lint.Error, "NodePool/named-spot-arm64", lint.CheckSelectsNothing) {
		t.Errorf("a rung naming a family the catalog does not know cannot be judged: %v", findings)
	}
}

func TestFallbackExpiryOnThePreferredCapacityType(t *testing.T) {
	ondemandFirst := rendered(t, class("od", v1alpha1.WorkloadClassSpec{
		Profile:       v1alpha1.ProfileMemoryOptimized,
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeSpot},
	}))
	static := rendered(t, class("st", v1alpha1.WorkloadClassSpec{
		Profile:       v1alpha1.ProfileMemoryOptimized,
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeSpot},
		Weighting:     &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic},
	}))
	findings := lint.Lint([]lint.Class{ondemandFirst, static}, render.Options{})
	if !has(findings, lint.Warning, "WorkloadClass/od", lint.CheckFallbackPreferred) || has(findings, lint.Warning, "WorkloadClass/st", lint.CheckFallbackPreferred) {
		t.Errorf("fallback-expiry-on-preferred: %v", findings)
	}
}

// TestClassOverlapIsOneFindingPerClass: n classes that all overlap give n-1 findings, not
// n(n-1)/2, so lint's output and memory stay linear in the number of classes (5,000 such
// classes once took 3 minutes and 16 GB).
func TestClassOverlapIsOneFindingPerClass(t *testing.T) {
	var classes []lint.Class
	for i := range 8 {
		classes = append(classes, rendered(t, class(fmt.Sprintf("c%d", i), v1alpha1.WorkloadClassSpec{})))
	}
	var overlaps []lint.Finding
	for _, f := range lint.Lint(classes, render.Options{}) {
		if f.Check == lint.CheckClassOverlap {
			overlaps = append(overlaps, f)
		}
	}
	if len(overlaps) != 7 {
		t.Fatalf("%d class-overlap findings, want 7: %v", len(overlaps), overlaps)
	}
	if !strings.Contains(overlaps[0].Message, "as class c1 ") || !strings.Contains(overlaps[0].Message, "likewise 6 more classes: c2, c3, c4, c5, c6, ...") {
		t.Errorf("first finding: %s", overlaps[0].Message)
	}
	if !strings.Contains(overlaps[5].Message, "as class c6 ") || !strings.Contains(overlaps[5].Message, "likewise class c7") {
		t.Errorf("sixth finding: %s", overlaps[5].Message)
	}
}

// TestSpotOutliersAreListed: a class whose catalog-chosen family is r8gd (89% off spot,
// against 65% for its category) is ranked by that outlier, and lint says so, naming the
// family and the weights without it; a Static class is not ranked by prices; and with
// prices where r8gd is ordinary (as live advisor figures could make it) nothing is said.
func TestSpotOutliersAreListed(t *testing.T) {
	spec := v1alpha1.WorkloadClassSpec{Profile: v1alpha1.ProfileMemoryOptimized, Consistency: v1alpha1.ConsistencyFamily,
		CapacityTypes: []v1alpha1.CapacityType{"spot", "on-demand"}, Weighting: &v1alpha1.Weighting{Ceiling: ptr.To(int32(60))}}
	memory := rendered(t, class("memory", spec))
	findings := lint.Lint([]lint.Class{memory}, render.Options{})
	var msg string
	for _, f := range findings {
		if f.Check == lint.CheckSpotOutlier {
			msg = string(f.Severity) + " " + f.Message
		}
	}
	for _, want := range []string{"warning ", "memory-spot-arm64-r8gd", "r8gd (12 types): spot discount 89% against category r's median of 65%", "decide the ranking", "memory-spot-arm64-r8gd 60->not rendered"} {
		if !strings.Contains(msg, want) {
			t.Errorf("spot-outlier finding %q lacks %q", msg, want)
		}
	}

	static := spec.DeepCopy()
	static.Weighting.Strategy = v1alpha1.WeightingStatic
	if f := lint.Lint([]lint.Class{rendered(t, class("static", *static))}, render.Options{}); has(f, lint.Warning, "WorkloadClass/static", lint.CheckSpotOutlier) || has(f, lint.Info, "WorkloadClass/static", lint.CheckSpotOutlier) {
		t.Errorf("a Static class is not ranked by prices: %v", f)
	}

	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	ordinary := render.Options{Catalog: cat.WithoutOutliers("us-east-1", cat.SpotOutliers("us-east-1"))}
	wc := class("memory", spec)
	res, err := render.Render(baseline(), wc, ordinary)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range lint.Lint([]lint.Class{{Class: wc, Baseline: baseline(), Result: res}}, ordinary) {
		if f.Check == lint.CheckSpotOutlier {
			t.Errorf("no outlier is left, got %v", f)
		}
	}
}

func TestRebalanceWithFallbackExpiry(t *testing.T) {
	preferred := &v1alpha1.Rebalance{Policy: v1alpha1.RebalancePreferred}
	// General sets fallbackExpireAfter; spot then on-demand gives fallback rungs.
	both := rendered(t, class("both", v1alpha1.WorkloadClassSpec{Rebalance: preferred}))
	never := rendered(t, class("never", v1alpha1.WorkloadClassSpec{Rebalance: preferred, FallbackExpireAfter: ptr.To(karpv1.MustParseNillableDuration("Never"))}))
	off := rendered(t, class("off", v1alpha1.WorkloadClassSpec{}))
	f := lint.Lint([]lint.Class{both, never, off}, render.Options{})
	if !has(f, lint.Warning, "WorkloadClass/both", lint.CheckRebalanceExpiry) || has(f, lint.Warning, "WorkloadClass/never", lint.CheckRebalanceExpiry) || has(f, lint.Warning, "WorkloadClass/off", lint.CheckRebalanceExpiry) {
		t.Errorf("rebalance/expiry check wrong: %v", f)
	}
	// The Baseline's default turns it on too (as the renderer resolves it).
	b := baseline()
	b.Spec.Rebalance = preferred
	wc := class("by-baseline", v1alpha1.WorkloadClassSpec{})
	res, err := render.Render(b, wc, render.Options{})
	byBaseline := lint.Class{Class: wc, Baseline: b, Result: res, Err: err}
	if f := lint.Lint([]lint.Class{byBaseline}, render.Options{}); !has(f, lint.Warning, "WorkloadClass/by-baseline", lint.CheckRebalanceExpiry) {
		t.Errorf("Baseline default not seen: %v", f)
	}
}
