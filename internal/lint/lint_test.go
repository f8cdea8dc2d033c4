package lint_test

import (
	"fmt"
	"strings"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
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
	findings := lint.Lint([]lint.Class{c, other})
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
	if f := lint.Lint([]lint.Class{web, apart, tainted}); has(f, lint.Warning, "WorkloadClass/batch", lint.CheckClassOverlap) || has(f, lint.Warning, "WorkloadClass/tainted", lint.CheckClassOverlap) || has(f, lint.Warning, "WorkloadClass/web", lint.CheckClassOverlap) {
		t.Errorf("separate bands or a distinguishing taint still reported: %v", f)
	}
	if f := lint.Lint([]lint.Class{web, amd}); !has(f, lint.Warning, "WorkloadClass/web", lint.CheckClassOverlap) {
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
	findings := lint.Lint([]lint.Class{gpu, general, graced})
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
	findings := lint.Lint([]lint.Class{reserved, old})
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
	if f := lint.Lint([]lint.Class{bad}); !has(f, lint.Error, "WorkloadClass/bad", lint.CheckInvalidSpec) {
		t.Errorf("render error not reported: %v", f)
	}
}

func TestCatalogBackedChecks(t *testing.T) {
	huge := rendered(t, class("huge", v1alpha1.WorkloadClassSpec{Instances: &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Min: ptr.To[int32](5000)}}}))
	named := rendered(t, class("named", v1alpha1.WorkloadClassSpec{
		Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64},
		Instances:     &v1alpha1.InstanceShape{Families: []string{"m7g", "m7i", "zz9"}},
	}))
	findings := lint.Lint([]lint.Class{huge, named})
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
	findings := lint.Lint([]lint.Class{ondemandFirst, static})
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
	for _, f := range lint.Lint(classes) {
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
