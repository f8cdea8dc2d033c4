package render_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// requirementValues are the values of every requirement on key with operator op in the
// class's first rung.
func requirementValues(res *render.Result, key string, op corev1.NodeSelectorOperator) []string {
	for _, r := range res.NodePools[0].Spec.Template.Spec.Requirements {
		if r.Key == key && r.Operator == op {
			return r.Values
		}
	}
	return nil
}

func withMemory(min, max string) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) {
		m := &v1alpha1.QuantityRange{}
		if min != "" {
			m.Min = ptr.To(resource.MustParse(min))
		}
		if max != "" {
			m.Max = ptr.To(resource.MustParse(max))
		}
		wc.Spec.Instances = &v1alpha1.InstanceShape{Memory: m}
	}
}

func TestMemoryBoundsBeyondInt32RenderWithoutWrapping(t *testing.T) {
	for _, tc := range []struct {
		min, max string
		gt, lt   string
	}{
		// 4194305Gi is 4294968320 MiB: it used to wrap int32 to Gt 1023.
		{min: "4194305Gi", gt: "4294968319"},
		// 10Pi is 10737418240 MiB: it used to fail "min 1024 is greater than max -2147483648".
		{min: "1Gi", max: "10Pi", gt: "1023", lt: "10737418241"},
		// Kubernetes' quantity parser saturates at 2^63-1 bytes, as admission does.
		{max: "10Ei", lt: fmt.Sprint(int64(math.MaxInt64)>>20 + 1)},
		// A minimum rounds up to whole MiB, a maximum down.
		{min: "1025Ki", max: "3071Ki", gt: "1", lt: "3"},
	} {
		res := mustRender(t, baseline(), class("mem", v1alpha1.ProfileGeneral, withMemory(tc.min, tc.max)))
		gt := requirementValues(res, render.LabelInstanceMemory, corev1.NodeSelectorOpGt)
		lt := requirementValues(res, render.LabelInstanceMemory, corev1.NodeSelectorOpLt)
		if (tc.gt == "") != (gt == nil) || (gt != nil && gt[0] != tc.gt) || (tc.lt == "") != (lt == nil) || (lt != nil && lt[0] != tc.lt) {
			t.Errorf("memory %q..%q: Gt %v Lt %v, want Gt %q Lt %q", tc.min, tc.max, gt, lt, tc.gt, tc.lt)
		}
	}
}

func TestCPUMaxAtInt32LimitDoesNotWrap(t *testing.T) {
	res := mustRender(t, baseline(), class("cpu", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances = &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Max: ptr.To[int32](math.MaxInt32)}}
	}))
	if lt := requirementValues(res, render.LabelInstanceCPU, corev1.NodeSelectorOpLt); len(lt) != 1 || lt[0] != "2147483648" {
		t.Errorf("Lt %v, want [2147483648]", lt)
	}
}

func TestNegativeBoundsAndLimitsAreRefusedNotDropped(t *testing.T) {
	b := baseline()
	for _, tc := range []struct {
		name, field string
		mutate      func(*v1alpha1.WorkloadClass)
	}{
		{"memory min -8Gi", "spec.instances.memory.min", withMemory("-8Gi", "")},
		{"memory max -1", "spec.instances.memory.max", withMemory("", "-1")},
		{"limits.cpu -5", "spec.limits[cpu]", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-5")}
		}},
		{"cpu min 0", "spec.instances.cpu.min", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Instances = &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Min: ptr.To[int32](0)}}
		}},
		{"gpu count max -2", "spec.instances.gpu.count.max", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Instances = &v1alpha1.InstanceShape{GPU: &v1alpha1.GPUShape{Count: &v1alpha1.IntRange{Max: ptr.To[int32](-2)}}}
		}},
		{"minGeneration 0", "spec.instances.minGeneration", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Instances = &v1alpha1.InstanceShape{MinGeneration: ptr.To[int32](0)}
		}},
		{"podShape memory -1Gi", "spec.weighting.podShape.memory", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{PodShape: &v1alpha1.PodShape{Memory: ptr.To(resource.MustParse("-1Gi"))}}
		}},
		// A zero request fits any number of pods: every rung would silently go unpriced.
		{"podShape cpu 0", "spec.weighting.podShape.cpu", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{PodShape: &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("0"))}}
		}},
		{"podShape memory 0 beside cpu", "spec.weighting.podShape.memory", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{PodShape: &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("0"))}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			renderError(t, b, class("neg", v1alpha1.ProfileGeneral, tc.mutate), v1alpha1.ReasonInvalidSpec, tc.field, "")
		})
	}
}

func TestRequirementsKarpenterRefusesAreRefusedOnTheClass(t *testing.T) {
	b := baseline()
	for _, tc := range []struct {
		name    string
		req     v1alpha1.Requirement
		message string
	}{
		{"Gt -1", v1alpha1.Requirement{Key: render.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"-1"}}, "single positive integer"},
		{"In nothing", v1alpha1.Requirement{Key: "karpenter.k8s.aws/instance-hypervisor", Operator: corev1.NodeSelectorOpIn}, "must have a value defined"},
		{"Lt abc", v1alpha1.Requirement{Key: render.LabelInstanceCPU, Operator: corev1.NodeSelectorOpLt, Values: []string{"abc"}}, "single positive integer"},
		{"Gt two values", v1alpha1.Requirement{Key: render.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"2", "4"}}, "single positive integer"},
		{"Gt 20 digits", v1alpha1.Requirement{Key: render.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"99999999999999999999"}}, "positive integer"},
		{"karpenter.sh/nodepool", v1alpha1.Requirement{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}, `"karpenter.sh/nodepool" is restricted`},
		{"kubernetes.io/hostname", v1alpha1.Requirement{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpExists}, "is not allowed"},
		{"karpenter.k8s.aws domain", v1alpha1.Requirement{Key: "karpenter.k8s.aws/nope", Operator: corev1.NodeSelectorOpExists}, "is not allowed"},
		{"a ladder axis", v1alpha1.Requirement{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}, "ladder's axes"},
		{"value not a label value", v1alpha1.Requirement{Key: "example.com/rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"bad value!"}}, "invalid value"},
		{"key not a qualified name", v1alpha1.Requirement{Key: "-bad", Operator: corev1.NodeSelectorOpExists}, "not a qualified name"},
		{"minValues above values", v1alpha1.Requirement{Key: "example.com/rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}, MinValues: ptr.To(2)}, "minimum number of values"},
		{"unknown operator", v1alpha1.Requirement{Key: "example.com/rack", Operator: "Near", Values: []string{"a"}}, "unsupported operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			renderError(t, b, class("req", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Requirements = []v1alpha1.Requirement{tc.req}
			}), v1alpha1.ReasonInvalidSpec, "spec.requirements[0]", tc.message)
		})
	}
	// What Karpenter accepts still renders.
	res := mustRender(t, b, class("req", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: render.LabelInstanceCPU, Operator: karpLte, Values: []string{"999999999999999999"}}}
	}))
	if got := requirementValues(res, render.LabelInstanceCPU, karpLte); len(got) != 1 {
		t.Errorf("Lte requirement lost: %v", got)
	}
}

const karpLte corev1.NodeSelectorOperator = "Lte"

func TestNamesEndingInADashAreRefused(t *testing.T) {
	b := baseline()
	renderError(t, b, class("fam", v1alpha1.ProfileGeneral, withFamilies(v1alpha1.ConsistencyFamily, "m7-")), v1alpha1.ReasonInvalidSpec, "spec.instances.families[0]", "does not match")
	renderError(t, b, class("typ", v1alpha1.ProfileGeneral, withTypes("m7g.xlarge-")), v1alpha1.ReasonInvalidSpec, "spec.instances.types[0]", "does not match")
	renderError(t, b, class("ex", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances = &v1alpha1.InstanceShape{ExcludeFamilies: []string{"t3-"}}
	}), v1alpha1.ReasonInvalidSpec, "spec.instances.excludeFamilies[0]", "does not match")
	renderError(t, b, class("gpu", v1alpha1.ProfileGPU, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances = &v1alpha1.InstanceShape{GPU: &v1alpha1.GPUShape{Names: []string{"t4-"}}}
	}), v1alpha1.ReasonInvalidSpec, "spec.instances.gpu.names[0]", "does not match")
	// Dashes inside names stay allowed: u-6tb1, m7i-flex.
	mustRender(t, b, class("inner", v1alpha1.ProfileGeneral, withTypes("m7i-flex.xlarge", "u-6tb1.metal")))
}

// validName says why a rung name is not a DNS subdomain and a label value, or "".
func validName(name string) string {
	errs := append(validation.IsDNS1123Subdomain(name), validation.IsValidLabelValue(name)...)
	return strings.Join(errs, "; ")
}

func TestShortenedRungNamesAreValidForEveryClassName(t *testing.T) {
	// The reported case: a '.' at index 53 used to give a name ending ".-1b6d841f".
	dotted := strings.Repeat("a", 53) + "." + strings.Repeat("b", 9)
	res := mustRender(t, baseline(), class(dotted, v1alpha1.ProfileGeneral))
	for _, r := range res.Rungs {
		if why := validName(r.Name); why != "" || len(r.Name) > 63 {
			t.Errorf("rung %q: %s", r.Name, why)
		}
	}
	// Every class name shape admission allows (a DNS subdomain of at most 63 characters),
	// with '.' and '-' at every position the hash rule can cut at, and every slice shape.
	slices := []string{"", "m7g", "u-6tb1", "m7i-flex-xlarge"}
	cts := []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved}
	checked := 0
	for length := 1; length <= 63; length++ {
		for pos := 1; pos < length-1; pos++ {
			for _, sep := range []string{".", "-"} {
				name := strings.Repeat("a", pos) + sep + strings.Repeat("b", length-pos-1)
				if validation.IsDNS1123Subdomain(name) != nil {
					continue
				}
				for _, ct := range cts {
					for _, arch := range []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64} {
						for _, s := range slices {
							rung := render.RungName(name, ct, arch, s)
							full := fmt.Sprintf("%s-%s-%s", name, ct, arch)
							if s != "" {
								full += "-" + s
							}
							if len(full) <= 63 && rung != full {
								t.Fatalf("%q was renamed to %q", full, rung)
							}
							if why := validName(rung); why != "" || len(rung) > 63 {
								t.Fatalf("class %q gives rung %q: %s", name, rung, why)
							}
							checked++
						}
					}
				}
			}
		}
	}
	if checked < 10000 {
		t.Errorf("checked only %d names", checked)
	}
}

// An invalid Baseline label is the Baseline's error, not the class's: the class's owner
// cannot fix it, and a message naming spec.labels sends them looking in the wrong object.
func TestInvalidBaselineLabelIsBlamedOnTheBaseline(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.Labels = v1alpha1.NodeLabels{"example.com/team": "not valid!"}
	})
	renderError(t, b, class("c", v1alpha1.ProfileGeneral), v1alpha1.ReasonInvalidSpec, "baseline.spec.nodePool.labels[example.com/team]", "not valid!")
	_, err := render.Render(b, class("c", v1alpha1.ProfileGeneral), render.Options{})
	var errs render.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			if strings.HasPrefix(e.Field, "spec.") {
				t.Errorf("the Baseline's label is blamed on the class: %s: %s", e.Field, e.Message)
			}
		}
	}
}

func TestReservedPoolsmithLabelsAreRefusedOnClassAndBaseline(t *testing.T) {
	renderError(t, baseline(), class("c", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Labels = v1alpha1.NodeLabels{v1alpha1.LabelRung: "x"}
	}), v1alpha1.ReasonInvalidSpec, "spec.labels[poolsmith.dev/rung]", "reserved")
	renderError(t, baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.Labels = v1alpha1.NodeLabels{"team.poolsmith.dev/owner": "x"}
	}), class("c", v1alpha1.ProfileGeneral), v1alpha1.ReasonInvalidSpec, "baseline.spec.nodePool.labels[team.poolsmith.dev/owner]", "reserved")
	res := mustRender(t, baseline(), class("c", v1alpha1.ProfileGeneral))
	for i, np := range res.NodePools {
		if got := np.Spec.Template.Labels[v1alpha1.LabelRung]; got != res.Rungs[i].Name {
			t.Errorf("rung label %q on %s", got, np.Name)
		}
	}
}
