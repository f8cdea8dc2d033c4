package render

import (
	"context"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Well-known labels the rendered requirements use.
const (
	LabelInstanceCategory   = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily     = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration = "karpenter.k8s.aws/instance-generation"
	LabelInstanceCPU        = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceMemory     = "karpenter.k8s.aws/instance-memory"
	LabelGPUCount           = "karpenter.k8s.aws/instance-gpu-count"
	LabelGPUManufacturer    = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelGPUName            = "karpenter.k8s.aws/instance-gpu-name"
)

// resolveShape resolves the ladder's axes and the requirements every rung shares.
func (r *renderer) resolveShape(t *template) {
	spec := r.class.Spec
	profileOrigin := OriginProfile(string(r.profileName))
	shape := spec.Instances
	if shape == nil {
		shape = &v1alpha1.InstanceShape{}
	}

	r.checkEnums(spec)
	r.checkSigns(spec)
	t.archs, t.archOrigin = pickList(layer[[]v1alpha1.Architecture]{r.profile.Architectures, profileOrigin}, layer[[]v1alpha1.Architecture]{spec.Architectures, OriginClass})
	t.capacityTypes, t.ctOrigin = pickList(layer[[]v1alpha1.CapacityType]{r.profile.CapacityTypes, profileOrigin}, layer[[]v1alpha1.CapacityType]{spec.CapacityTypes, OriginClass})

	req := func(key string, op corev1.NodeSelectorOperator, origin Origin, values ...string) {
		t.requirements = append(t.requirements, originReq{karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}, origin})
	}
	if r.profileName != v1alpha1.ProfileCustom {
		req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, profileOrigin, OS)
	}
	if len(spec.Zones) > 0 {
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, OriginClass, spec.Zones...)
	}

	switch consistency := spec.Consistency; consistency {
	case "", v1alpha1.ConsistencyDiverse:
		t.sliceKind = SliceNone
	case v1alpha1.ConsistencyFamily:
		t.sliceKind = SliceFamily
	case v1alpha1.ConsistencyType:
		t.sliceKind = SliceType
	default:
		r.invalid("spec.consistency", fmt.Sprintf("unknown consistency %q", consistency))
	}

	// An explicit family or type is more specific than the profile's broad shape, so the
	// profile's categories and generation floor apply only without them.
	explicit := len(shape.Families) > 0 || len(shape.Types) > 0
	switch {
	case len(shape.Categories) > 0:
		req(LabelInstanceCategory, corev1.NodeSelectorOpIn, OriginClass, shape.Categories...)
	case !explicit && len(r.profile.Categories) > 0:
		req(LabelInstanceCategory, corev1.NodeSelectorOpIn, profileOrigin, r.profile.Categories...)
	}
	if t.sliceKind != SliceFamily {
		if families := without(shape.Families, shape.ExcludeFamilies); len(families) > 0 {
			req(LabelInstanceFamily, corev1.NodeSelectorOpIn, OriginClass, families...)
		} else if len(shape.ExcludeFamilies) > 0 {
			req(LabelInstanceFamily, corev1.NodeSelectorOpNotIn, OriginClass, shape.ExcludeFamilies...)
		}
	}
	if t.sliceKind != SliceType && len(shape.Types) > 0 {
		req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, OriginClass, shape.Types...)
	}
	switch {
	case shape.MinGeneration != nil && *shape.MinGeneration < 1:
		r.invalid("spec.instances.minGeneration", fmt.Sprintf("%d: must be at least 1", *shape.MinGeneration))
	case shape.MinGeneration != nil:
		req(LabelInstanceGeneration, corev1.NodeSelectorOpGt, OriginClass, fmt.Sprint(*shape.MinGeneration-1))
	case !explicit && r.profile.MinGeneration != nil:
		req(LabelInstanceGeneration, corev1.NodeSelectorOpGt, profileOrigin, fmt.Sprint(*r.profile.MinGeneration-1))
	}
	r.rangeReqs(req, LabelInstanceCPU, "spec.instances.cpu", r.countRange("spec.instances.cpu", shape.CPU), OriginClass)
	if m := shape.Memory; m != nil {
		// Karpenter's instance-memory label is in MiB: the minimum rounds up, the maximum down.
		mib := bounds{}
		if m.Min != nil {
			if v, ok := r.bytes("spec.instances.memory.min", *m.Min); ok {
				mib.min = ptr.To(v>>20 + min(v&(1<<20-1), 1))
			}
		}
		if m.Max != nil {
			if v, ok := r.bytes("spec.instances.memory.max", *m.Max); ok {
				mib.max = ptr.To(v >> 20)
			}
		}
		r.rangeReqs(req, LabelInstanceMemory, "spec.instances.memory", mib, OriginClass)
	}
	gpu := shape.GPU
	if gpu == nil {
		gpu = &v1alpha1.GPUShape{}
	}
	if gpu.Count != nil {
		r.rangeReqs(req, LabelGPUCount, "spec.instances.gpu.count", r.countRange("spec.instances.gpu.count", gpu.Count), OriginClass)
	} else {
		r.rangeReqs(req, LabelGPUCount, "spec.instances.gpu.count", r.countRange("", r.profile.GPUCount), profileOrigin)
	}
	if maker, origin := pick(layer[string]{r.profile.GPUMaker, profileOrigin}, layer[string]{gpu.Manufacturer, OriginClass}); maker != "" {
		req(LabelGPUManufacturer, corev1.NodeSelectorOpIn, origin, maker)
	}
	if len(gpu.Names) > 0 {
		req(LabelGPUName, corev1.NodeSelectorOpIn, OriginClass, gpu.Names...)
	}
	for i, extra := range spec.Requirements {
		if req := extra.DeepCopy().Karpenter(); r.checkRequirement(fmt.Sprintf("spec.requirements[%d]", i), req) {
			t.requirements = append(t.requirements, originReq{req, OriginClass})
		}
	}
	if r.profileName == v1alpha1.ProfileCustom && (len(t.archs) == 0 || len(t.capacityTypes) == 0) {
		r.invalid("spec.profile", "Custom has no defaults: set spec.architectures and spec.capacityTypes")
	}
	r.resolveSlices(t, shape)
}

// resolveSlices gives each architecture its families or types. Named ones go only to the
// architectures the catalog knows them for (unknown names go to every architecture);
// without names, the catalog chooses the cheapest that fit the shape.
func (r *renderer) resolveSlices(t *template, shape *v1alpha1.InstanceShape) {
	if t.sliceKind == SliceNone {
		return
	}
	field, named := "spec.instances.types", shape.Types
	if t.sliceKind == SliceFamily {
		field, named = "spec.instances.families", without(shape.Families, shape.ExcludeFamilies)
	}
	t.slices = map[v1alpha1.Architecture][]string{}
	if len(named) == 0 {
		r.chooseSlices(t, field)
		return
	}
	t.sliceOrigin = OriginClass
	placed := 0
	for _, arch := range t.archs {
		for _, s := range named {
			if known, ok := r.catalog.Arch(s); !ok || known == string(arch) {
				t.slices[arch] = append(t.slices[arch], s)
				placed++
			}
		}
	}
	if placed == 0 && len(t.archs) > 0 {
		r.invalid(field, fmt.Sprintf("none of %v has instance types for architectures %v", named, t.archs))
	}
}

// chooseSlices picks, per architecture, the ChosenPerArch families or types with the lowest
// price per unit of what the profile buys, priced as the class's first capacity type.
func (r *renderer) chooseSlices(t *template, field string) {
	unit := r.unit()
	spot := len(t.capacityTypes) > 0 && t.capacityTypes[0] == v1alpha1.CapacityTypeSpot
	priced := "on-demand"
	if spot {
		priced = "spot average"
	}
	shape := plain(t.requirements)
	t.sliceOrigin = OriginComputed(fmt.Sprintf("catalog(cheapest %d %s per architecture by %s price per %s in %s)", ChosenPerArch, t.sliceKind.Plural(), priced, unit, r.region))
	for _, arch := range t.archs {
		reqs := append(shape, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(arch)}})
		t.slices[arch] = r.catalog.Cheapest(catalog.Choice{Requirements: reqs, Region: r.region, Spot: spot, Unit: unit, N: ChosenPerArch}, t.sliceKind == SliceFamily)
	}
	for _, arch := range t.archs {
		if len(t.slices[arch]) > 0 {
			return
		}
	}
	if len(t.archs) > 0 {
		r.invalid(field, fmt.Sprintf("consistency %s names no %s and no catalog type in %s fits the class's shape; name them", r.class.Spec.Consistency, t.sliceKind.Plural(), r.region))
	}
}

// Values the CRD's enums allow; the renderer checks them too, because the CLI renders
// manifests no API server has admitted.
var (
	validArchs         = []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64}
	validCapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved}
	// Names end in an alphanumeric: a trailing '-' would end a rung name and a requirement
	// value, which Kubernetes and Karpenter refuse.
	familyName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	typeName   = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z0-9]+(-[a-z0-9]+)*$`)
	gpuName    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
)

// checkEnums rejects what admission would: unknown or repeated architectures and capacity
// types, and family or type names that could not name a rung.
func (r *renderer) checkEnums(spec v1alpha1.WorkloadClassSpec) {
	checkList(r, "spec.architectures", spec.Architectures, validArchs)
	checkList(r, "spec.capacityTypes", spec.CapacityTypes, validCapacityTypes)
	if shape := spec.Instances; shape != nil {
		for _, names := range []struct {
			field string
			list  []string
			re    *regexp.Regexp
		}{{"spec.instances.families", shape.Families, familyName}, {"spec.instances.excludeFamilies", shape.ExcludeFamilies, familyName}, {"spec.instances.types", shape.Types, typeName}, {"spec.instances.gpu.names", gpuNames(shape.GPU), gpuName}} {
			for i, n := range names.list {
				if !names.re.MatchString(n) || len(n) > validation.LabelValueMaxLength {
					r.invalid(fmt.Sprintf("%s[%d]", names.field, i), fmt.Sprintf("%q does not match %s (at most %d characters)", n, names.re, validation.LabelValueMaxLength))
				}
			}
		}
	}
}

// checkSigns refuses negative limits and pod shapes that are not positive, which admission
// refuses too: a negative limit would render every rung with a zero limit, so no node would
// launch, and a zero request fits any number of pods, so no rung could be priced per pod.
func (r *renderer) checkSigns(spec v1alpha1.WorkloadClassSpec) {
	for _, name := range slices.Sorted(maps.Keys(spec.Limits)) {
		if q := spec.Limits[name]; q.Sign() < 0 {
			r.invalid(fmt.Sprintf("spec.limits[%s]", name), fmt.Sprintf("%s: must not be negative", q.String()))
		}
	}
	if w := spec.Weighting; w != nil && w.PodShape != nil {
		ps := w.PodShape
		for _, q := range []struct {
			field string
			q     *resource.Quantity
		}{{"spec.weighting.podShape.cpu", ps.CPU}, {"spec.weighting.podShape.memory", ps.Memory}} {
			if q.q != nil && q.q.Sign() <= 0 {
				r.invalid(q.field, fmt.Sprintf("%s: must be positive", q.q.String()))
			}
		}
		if ps.GPU != nil && *ps.GPU < 1 {
			r.invalid("spec.weighting.podShape.gpu", fmt.Sprintf("%d: must be at least 1", *ps.GPU))
		}
	}
}

// checkRequirement applies Karpenter's own rules for a NodePool requirement, as its CRD
// and its runtime validation do, so the class is refused instead of its NodePools; and
// Poolsmith's: the ladder's axes have their own fields. It says whether req is valid.
func (r *renderer) checkRequirement(field string, req karpv1.NodeSelectorRequirementWithMinValues) bool {
	var msgs []string
	switch req.Key {
	case karpv1.CapacityTypeLabelKey, corev1.LabelArchStable:
		msgs = append(msgs, "capacity types and architectures are the ladder's axes: use spec.capacityTypes and spec.architectures")
	case karpv1.NodePoolLabelKey:
		msgs = append(msgs, fmt.Sprintf("label %q is restricted by Karpenter", req.Key))
	}
	if err := karpv1.ValidateRequirement(context.Background(), req); err != nil {
		msgs = append(msgs, err.Error())
	}
	if mv := req.MinValues; mv != nil && (*mv < 1 || *mv > 50) {
		msgs = append(msgs, fmt.Sprintf("minValues %d must be between 1 and 50", *mv))
	}
	switch req.Operator {
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		// Admission accepts up to 18 digits, which always fit Karpenter's integer.
		if len(req.Values) == 1 && !integerValue.MatchString(req.Values[0]) {
			msgs = append(msgs, fmt.Sprintf("operator %s needs one non-negative integer of at most 18 digits, got %q", req.Operator, req.Values[0]))
		}
	}
	for _, m := range msgs {
		r.invalid(field, m)
	}
	return len(msgs) == 0
}

var integerValue = regexp.MustCompile(`^[0-9]{1,18}$`)

func gpuNames(g *v1alpha1.GPUShape) []string {
	if g == nil {
		return nil
	}
	return g.Names
}

func checkList[T comparable](r *renderer, field string, list, valid []T) {
	seen := map[T]bool{}
	for i, v := range list {
		switch {
		case !slices.Contains(valid, v):
			r.invalid(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("unsupported value %q: supported values are %v", fmt.Sprint(v), valid))
		case seen[v]:
			r.invalid(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("duplicate value %q", fmt.Sprint(v)))
		}
		seen[v] = true
	}
}

// bounds is an inclusive range in int64, so that Gt min-1 and Lt max+1 cannot wrap.
type bounds struct{ min, max *int64 }

// countRange checks a count range (cpu, GPUs) as admission does: each end at least 1.
func (r *renderer) countRange(field string, rng *v1alpha1.IntRange) bounds {
	var b bounds
	if rng == nil {
		return b
	}
	for _, end := range []struct {
		name string
		v    *int32
		into **int64
	}{{"min", rng.Min, &b.min}, {"max", rng.Max, &b.max}} {
		switch {
		case end.v == nil:
		case *end.v < 1:
			r.invalid(field+"."+end.name, fmt.Sprintf("%d: must be at least 1", *end.v))
		default:
			*end.into = ptr.To(int64(*end.v))
		}
	}
	return b
}

// bytes is a memory bound in bytes; negative bounds are refused. Kubernetes' quantity
// parser saturates at 2^63-1 (so 10Ei reads as just under 8Ei, here, in admission and in
// the controller alike), and the MiB arithmetic below stays within int64.
func (r *renderer) bytes(field string, q resource.Quantity) (int64, bool) {
	if q.Sign() < 0 {
		r.invalid(field, fmt.Sprintf("%s: must not be negative", q.String()))
		return 0, false
	}
	return q.Value(), true
}

// rangeReqs turns an inclusive range into Gt/Lt requirements.
func (r *renderer) rangeReqs(req func(string, corev1.NodeSelectorOperator, Origin, ...string), key, field string, rng bounds, origin Origin) {
	if rng.min != nil && rng.max != nil && *rng.min > *rng.max {
		r.invalid(field, fmt.Sprintf("min %d is greater than max %d", *rng.min, *rng.max))
		return
	}
	if rng.min != nil && *rng.min > 0 {
		req(key, corev1.NodeSelectorOpGt, origin, fmt.Sprint(*rng.min-1))
	}
	if rng.max != nil && *rng.max < math.MaxInt64 {
		req(key, corev1.NodeSelectorOpLt, origin, fmt.Sprint(*rng.max+1))
	}
}

func without(list, remove []string) []string {
	drop := map[string]bool{}
	for _, s := range remove {
		drop[s] = true
	}
	var out []string
	for _, s := range list {
		if !drop[s] {
			out = append(out, s)
		}
	}
	return out
}

// ChosenPerArch is how many families (consistency Family) or types (Type) the catalog
// chooses for each architecture when the class names none.
const ChosenPerArch = 3
