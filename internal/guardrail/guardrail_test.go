package guardrail_test

import (
	"errors"
	"strings"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/guardrail"
	"github.com/poolsmith/poolsmith/internal/render"
)

// Bounded is a Baseline with every guardrail set; Within a class inside all of them.
func Bounded() *v1alpha1.Baseline {
	q := resource.MustParse
	return &v1alpha1.Baseline{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.BaselineSpec{
			NodeClass: awsv1.EC2NodeClassSpec{
				Role:                       "KarpenterNodeRole-prod",
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "prod"}}},
			},
			NodePool: v1alpha1.NodePoolDefaults{Labels: v1alpha1.NodeLabels{"example.com/env": "prod"}},
			Guardrails: &v1alpha1.Guardrails{
				Ceilings:           &v1alpha1.Ceilings{CPU: ptr.To(q("256")), Memory: ptr.To(q("1Ti")), GPU: ptr.To(q("8")), Nodes: ptr.To(q("20")), BudgetPerHour: "50.00"},
				Profiles:           []v1alpha1.Profile{v1alpha1.ProfileGeneral, v1alpha1.ProfileGPU},
				CapacityTypes:      []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot},
				CapacityTypeGrants: []v1alpha1.CapacityTypeGrant{{CapacityType: v1alpha1.CapacityTypeOnDemand, Label: "example.com/on-demand"}},
				Categories:         []string{"c", "m", "r", "g"},
				MinGeneration:      ptr.To[int32](5),
				GPUNames:           []string{"t4", "l4"},
				RequireGPUTaint:    true,
				RequireTeam:        true,
			},
		},
	}
}

func Within() *v1alpha1.WorkloadClass {
	return &v1alpha1.WorkloadClass{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{v1alpha1.LabelTeam: "a"}},
		Spec: v1alpha1.WorkloadClassSpec{
			CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot},
			Limits:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
		},
	}
}

func TestJudge(t *testing.T) {
	gpu := func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Profile = v1alpha1.ProfileGPU
		wc.Spec.Instances = &v1alpha1.InstanceShape{Categories: []string{"g"}, MinGeneration: ptr.To[int32](5), GPU: &v1alpha1.GPUShape{Names: []string{"t4"}}}
	}
	for _, row := range []struct {
		name  string
		edit  func(*v1alpha1.WorkloadClass)
		field string // "" when within bounds
		says  string
	}{
		{"within", func(*v1alpha1.WorkloadClass) {}, "", ""},
		{"cpu above the ceiling", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("1000") }, "spec.limits", "cpu 1k is above the ceiling 256"},
		{"gpu above the ceiling", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Limits[v1alpha1.LimitNvidiaGPU] = resource.MustParse("9") }, "spec.limits", "nvidia.com/gpu 9 is above the ceiling 8"},
		{"a budget within the ceiling", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Budget = &v1alpha1.Budget{PerHour: "49.9999"} }, "", ""},
		{"a budget above the ceiling", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Budget = &v1alpha1.Budget{PerHour: "50.01"} }, "spec.budget", "perHour 50.01 is above the ceiling 50.00"},
		{"a budget in mode Warn", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Budget = &v1alpha1.Budget{PerHour: "10", Mode: v1alpha1.BudgetWarn}
		}, "spec.budget", "mode Warn is not allowed under a budget ceiling"},
		{"on-demand without the grant", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = append(wc.Spec.CapacityTypes, v1alpha1.CapacityTypeOnDemand)
		}, "spec.capacityTypes", "on-demand is not allowed"},
		{"on-demand with the grant", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.CapacityTypes = append(wc.Spec.CapacityTypes, v1alpha1.CapacityTypeOnDemand)
			wc.Labels["example.com/on-demand"] = "true"
		}, "", ""},
		{"the profile's capacity types count", func(wc *v1alpha1.WorkloadClass) { wc.Spec.CapacityTypes = nil }, "spec.capacityTypes", "on-demand (from profile General)"},
		{"a profile not allowed", func(wc *v1alpha1.WorkloadClass) { wc.Spec.Profile = v1alpha1.ProfileMemoryOptimized }, "spec.profile", "MemoryOptimized is not allowed"},
		{"a family of another category", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Instances = &v1alpha1.InstanceShape{Families: []string{"m7g", "t3"}}
		}, "spec.instances", "t3 is outside the allowed categories"},
		{"a type of an old generation", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Instances = &v1alpha1.InstanceShape{Types: []string{"m4.large"}}
		}, "spec.instances.minGeneration", "older than guardrails.minGeneration 5"},
		{"a GPU class with its own taint", func(wc *v1alpha1.WorkloadClass) {
			gpu(wc)
			wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/team-a-gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, "", ""},
		{"a GPU class without a taint", func(wc *v1alpha1.WorkloadClass) { gpu(wc) }, "spec.taints", "needs a NoSchedule or NoExecute taint of its own"},
		{"the GPU profile's categories count", func(wc *v1alpha1.WorkloadClass) {
			gpu(wc)
			wc.Spec.Instances.Categories = nil
		}, "spec.instances", "p (from profile GPU) is outside the allowed categories"},
		{"a GPU model not allowed", func(wc *v1alpha1.WorkloadClass) {
			gpu(wc)
			wc.Spec.Instances.GPU.Names = []string{"h100"}
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/team-a-gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, "spec.instances.gpu.names", "h100 is not allowed"},
		{"no team", func(wc *v1alpha1.WorkloadClass) { wc.Labels = nil }, "metadata.labels[poolsmith.dev/team]", "must name its team"},
		{"a label contradicting the Baseline's", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/env": "dev"}
		}, "spec.labels[example.com/env]", `class value "dev" contradicts the Baseline's mandatory value "prod"`},
		{"another Baseline's class", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.BaselineRef = &v1alpha1.BaselineReference{Name: "other"}
			wc.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("1000")
		}, "", ""},
	} {
		t.Run(row.name, func(t *testing.T) {
			wc := Within()
			row.edit(wc)
			err := guardrail.Judge(Bounded(), wc)
			if row.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var errs render.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v, want render.Errors", err)
			}
			reason := v1alpha1.ReasonGuardrailViolation
			if strings.HasPrefix(row.field, "spec.labels[") {
				reason = v1alpha1.ReasonBaselineConflict
			}
			if errs[0].Field != row.field || !strings.Contains(errs[0].Message, row.says) || errs.Reason() != reason {
				t.Errorf("first refusal %s: %s (reason %s); want %s: ...%s... (%s)", errs[0].Field, errs[0].Message, errs.Reason(), row.field, row.says, reason)
			}
		})
	}
}

// A class that sets no budget is held to the ceiling, enforced, origin baseline:guardrail;
// its own budget stays the class's.
func TestTheBudgetCeilingIsTheDefaultBudget(t *testing.T) {
	wc := Within()
	b, origin := render.ClassBudget(Bounded(), wc)
	if b == nil || b.PerHour != "50.00" || b.Mode != v1alpha1.BudgetEnforce || origin != render.OriginGuardrail {
		t.Errorf("budget = %+v from %s, want 50.00 Enforce from %s", b, origin, render.OriginGuardrail)
	}
	wc.Spec.Budget = &v1alpha1.Budget{PerHour: "12.5"}
	if b, origin := render.ClassBudget(Bounded(), wc); b.PerHour != "12.5" || origin != render.OriginClass {
		t.Errorf("budget = %+v from %s, want the class's 12.5", b, origin)
	}
	if b, _ := render.ClassBudget(nil, Within()); b != nil {
		t.Errorf("without a Baseline the budget is %+v, want none", b)
	}
}

// A class that sets no limit gets each ceiling, origin baseline:guardrail; its own limit
// stays the class's.
func TestCeilingsAreTheDefaultLimits(t *testing.T) {
	wc := Within()
	limits, origin := render.ClassLimits(Bounded(), wc)
	if q := limits[corev1.ResourceCPU]; q.String() != "100" || origin[corev1.ResourceCPU] != render.OriginClass {
		t.Errorf("cpu = %s from %s", q.String(), origin[corev1.ResourceCPU])
	}
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceMemory: "1Ti", v1alpha1.LimitNvidiaGPU: "8", v1alpha1.LimitAMDGPU: "8", v1alpha1.LimitNodes: "20"} {
		if q := limits[name]; q.String() != want || origin[name] != render.OriginGuardrail {
			t.Errorf("%s = %s from %s, want %s from %s", name, q.String(), origin[name], want, render.OriginGuardrail)
		}
	}
}
