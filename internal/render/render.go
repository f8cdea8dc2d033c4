package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// API versions of the rendered objects.
const (
	NodeClassAPIVersion = "karpenter.k8s.aws/v1"
	NodePoolAPIVersion  = "karpenter.sh/v1"
)

// Options carry what only the cluster knows. The zero value is the offline default.
type Options struct {
	// Usage is what each NodePool currently uses (its status.resources), by name. A class's
	// limit is split across rungs from it: each rung may use the class limit minus what the
	// other rungs use. Without usage every rung gets the whole class limit.
	Usage map[string]corev1.ResourceList
	// Region ranks the catalog's prices when it chooses families or types; default
	// us-east-1.
	Region string
	// Catalog replaces the embedded instance catalog (tests).
	Catalog *catalog.Catalog
}

// ChosenPerArch is how many families (consistency Family) or types (Type) the catalog
// chooses for each architecture when the class names none.
const ChosenPerArch = 3

// Result is a rendered NodePool family.
type Result struct {
	// Class is the WorkloadClass's name.
	Class string
	// Profile is the resolved profile.
	Profile v1alpha1.Profile
	// CostBased is true when weights come from prices (Cost or RiskAdjustedCost).
	CostBased bool
	NodeClass *awsv1.EC2NodeClass
	// NodePools are in ladder order, most preferred first.
	NodePools []*karpv1.NodePool
	// NodeOverlays encode interruption risk for Karpenter's own choice (weighting.nodeOverlays).
	NodeOverlays []*karpv1alpha1.NodeOverlay
	Rungs        []Rung
	// Provenance has every field of the EC2NodeClass and then of each NodePool.
	Provenance Provenance
}

// Error is one reason a class cannot be rendered.
type Error struct {
	// Reason is the Synced condition reason it maps to: InvalidSpec or BaselineConflict.
	Reason string
	// Field is the offending field of the WorkloadClass (or baseline.… for the Baseline's).
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Errors are every reason a class cannot be rendered, in the order they were found.
type Errors []*Error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Reason is the Synced reason for the errors: BaselineConflict if any is one.
func (e Errors) Reason() string {
	for _, err := range e {
		if err.Reason == v1alpha1.ReasonBaselineConflict {
			return v1alpha1.ReasonBaselineConflict
		}
	}
	return v1alpha1.ReasonInvalidSpec
}

type renderer struct {
	catalog     *catalog.Catalog
	region      string
	baseline    *v1alpha1.Baseline
	class       *v1alpha1.WorkloadClass
	opts        Options
	profileName v1alpha1.Profile
	profile     ProfileDefaults
	errs        Errors

	nodeClassOrigins origins
}

func (r *renderer) invalid(field, msg string) {
	r.errs = append(r.errs, &Error{Reason: v1alpha1.ReasonInvalidSpec, Field: field, Message: msg})
}

func (r *renderer) conflict(field, msg string) {
	r.errs = append(r.errs, &Error{Reason: v1alpha1.ReasonBaselineConflict, Field: field, Message: msg})
}

// Render turns a WorkloadClass on top of its Baseline into one EC2NodeClass and a ladder
// of NodePools. It returns Errors when the class cannot be rendered.
func Render(baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass, opts Options) (*Result, error) {
	if baseline == nil || class == nil {
		return nil, fmt.Errorf("render needs a Baseline and a WorkloadClass")
	}
	r := &renderer{baseline: baseline, class: class, opts: opts, profileName: class.Spec.Profile}
	if r.profileName == "" {
		r.profileName = v1alpha1.ProfileGeneral
	}
	profile, ok := Profiles[r.profileName]
	if !ok {
		return nil, Errors{{Reason: v1alpha1.ReasonInvalidSpec, Field: "spec.profile", Message: fmt.Sprintf("unknown profile %q", class.Spec.Profile)}}
	}
	r.profile = profile
	r.catalog, r.region = opts.Catalog, opts.Region
	if r.region == "" {
		r.region = catalog.DefaultRegion
	}
	if r.catalog == nil {
		c, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("loading the embedded catalog: %w", err)
		}
		r.catalog = c
	}

	nodeClass := r.renderNodeClass()
	tmpl := r.template()
	rungs := r.ladder(tmpl)
	if len(r.errs) > 0 {
		return nil, r.errs
	}

	res := &Result{Class: class.Name, Profile: r.profileName, NodeClass: nodeClass, Rungs: rungs, CostBased: r.strategy() != v1alpha1.WeightingStatic}
	nodeClassDoc, err := CleanJSON(nodeClass)
	if err != nil {
		return nil, err
	}
	res.Provenance = append(res.Provenance, trace("EC2NodeClass/"+nodeClass.Name, nodeClassDoc, r.nodeClassOrigins)...)
	for _, rung := range rungs {
		np, o := r.nodePool(tmpl, rung)
		doc, err := CleanJSON(np)
		if err != nil {
			return nil, err
		}
		res.NodePools = append(res.NodePools, np)
		res.Provenance = append(res.Provenance, trace("NodePool/"+np.Name, doc, o)...)
	}
	overlays, overlayOrigins := r.overlays(tmpl, rungs)
	for i, ov := range overlays {
		doc, err := CleanJSON(ov)
		if err != nil {
			return nil, err
		}
		res.NodeOverlays = append(res.NodeOverlays, ov)
		res.Provenance = append(res.Provenance, trace("NodeOverlay/"+ov.Name, doc, overlayOrigins[i])...)
	}
	return res, nil
}

// ownerLabels are the labels every child carries; the controller's cache selects on them.
func (r *renderer) ownerLabels() map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		v1alpha1.LabelClass:     r.class.Name,
	}
}

// originReq is a requirement with the origin of its values.
type originReq struct {
	karpv1.NodeSelectorRequirementWithMinValues
	origin Origin
}

// template holds what every rung of the class shares.
type template struct {
	origins        origins
	labels         map[string]string
	annotations    map[string]string
	taints         []corev1.Taint
	startupTaints  []corev1.Taint
	requirements   []originReq
	expireAfter    string
	fallbackExpire string
	fallbackOrigin Origin
	tgp            *metav1.Duration
	policy         karpv1.ConsolidationPolicy
	after          string
	budgets        []karpv1.Budget
	capacityTypes  []v1alpha1.CapacityType
	archs          []v1alpha1.Architecture
	ctOrigin       Origin
	archOrigin     Origin
	sliceKind      SliceKind
	// slices are each architecture's families or types, in preference order.
	slices      map[v1alpha1.Architecture][]string
	sliceOrigin Origin
}

const tmplPath = "spec.template"

func (r *renderer) template() *template {
	spec, bnp := r.class.Spec, r.baseline.Spec.NodePool
	profileOrigin := OriginProfile(string(r.profileName))
	t := &template{origins: origins{}}
	o := t.origins

	t.labels = r.mergeMandatory("labels", bnp.Labels, spec.Labels, tmplPath+".metadata.labels", o)
	t.annotations = r.mergeMandatory("annotations", bnp.Annotations, spec.Annotations, tmplPath+".metadata.annotations", o)
	r.validateLabels(t.labels)

	profileTaints := append([]v1alpha1.Taint(nil), r.profile.Taints...)
	if r.profile.ClassTaint {
		profileTaints = append(profileTaints, v1alpha1.Taint{Key: v1alpha1.LabelClass, Value: r.class.Name, Effect: corev1.TaintEffectNoSchedule})
	}
	t.taints = unionTaints(tmplPath+".spec.taints", o,
		layer[v1alpha1.Taints]{bnp.Taints, OriginBaseline},
		layer[v1alpha1.Taints]{profileTaints, profileOrigin},
		layer[v1alpha1.Taints]{spec.Taints, OriginClass})
	t.startupTaints = unionTaints(tmplPath+".spec.startupTaints", o,
		layer[v1alpha1.Taints]{bnp.StartupTaints, OriginBaseline},
		layer[v1alpha1.Taints]{spec.StartupTaints, OriginClass})

	// Durations are resolved as strings and parsed once per object: a NillableDuration left
	// zero would marshal as Never.
	var origin Origin
	t.expireAfter, origin = pick(
		layer[string]{KarpenterDefaultExpireAfter, OriginKarpenterDefault},
		layer[string]{durationString(bnp.ExpireAfter), OriginBaseline},
		layer[string]{r.profile.ExpireAfter, profileOrigin},
		layer[string]{durationString(spec.ExpireAfter), OriginClass})
	o.set(tmplPath+".spec.expireAfter", origin)
	t.fallbackExpire, t.fallbackOrigin = pick(
		layer[string]{r.profile.FallbackExpireAfter, profileOrigin},
		layer[string]{durationString(spec.FallbackExpireAfter), OriginClass})

	switch {
	case spec.TerminationGracePeriod != nil:
		t.tgp = spec.TerminationGracePeriod
		o.set(tmplPath+".spec.terminationGracePeriod", OriginClass)
	case bnp.TerminationGracePeriod != nil:
		t.tgp = bnp.TerminationGracePeriod
		o.set(tmplPath+".spec.terminationGracePeriod", OriginBaseline)
	}

	bd, cd := disruptionOrEmpty(bnp.Disruption), disruptionOrEmpty(spec.Disruption)
	var policy string
	policy, origin = pick(
		layer[string]{string(KarpenterDefaultConsolidationPolicy), OriginKarpenterDefault},
		layer[string]{string(bd.ConsolidationPolicy), OriginBaseline},
		layer[string]{string(r.profile.ConsolidationPolicy), profileOrigin},
		layer[string]{string(cd.ConsolidationPolicy), OriginClass})
	t.policy = karpv1.ConsolidationPolicy(policy)
	o.set("spec.disruption.consolidationPolicy", origin)
	t.after, origin = pick(
		layer[string]{KarpenterDefaultConsolidateAfter, OriginKarpenterDefault},
		layer[string]{durationString(bd.ConsolidateAfter), OriginBaseline},
		layer[string]{r.profile.ConsolidateAfter, profileOrigin},
		layer[string]{durationString(cd.ConsolidateAfter), OriginClass})
	o.set("spec.disruption.consolidateAfter", origin)
	t.budgets, origin = []karpv1.Budget{{Nodes: KarpenterDefaultBudgetNodes}}, OriginKarpenterDefault
	if len(bd.Budgets) > 0 {
		t.budgets, origin = bd.Budgets, OriginBaseline
	}
	if len(cd.Budgets) > 0 {
		t.budgets, origin = cd.Budgets, OriginClass
	}
	o.set("spec.disruption.budgets", origin)

	r.resolveShape(t)
	return t
}

func disruptionOrEmpty(d *v1alpha1.Disruption) v1alpha1.Disruption {
	if d == nil {
		return v1alpha1.Disruption{}
	}
	return *d
}

func durationString(d *karpv1.NillableDuration) string {
	if d == nil {
		return ""
	}
	if d.Duration == nil {
		return karpv1.Never
	}
	if d.Raw != nil {
		var s string
		if json.Unmarshal(d.Raw, &s) == nil {
			return s
		}
	}
	return d.Duration.String()
}

// layer is one precedence layer's value for a field; the zero value means unset.
type layer[T any] struct {
	value  T
	origin Origin
}

// pick returns the highest set layer's value (layers lowest first).
func pick[T comparable](layers ...layer[T]) (T, Origin) {
	var zero T
	value, origin := zero, Origin("")
	for _, l := range layers {
		if l.value != zero {
			value, origin = l.value, l.origin
		}
	}
	return value, origin
}

// pickList is pick for lists: the highest layer with a non-empty list.
func pickList[T any](layers ...layer[[]T]) ([]T, Origin) {
	var value []T
	var origin Origin
	for _, l := range layers {
		if len(l.value) > 0 {
			value, origin = l.value, l.origin
		}
	}
	return value, origin
}

// mergeMandatory merges labels or annotations key by key: the Baseline's keys are
// mandatory, so a class value that differs is a conflict.
func (r *renderer) mergeMandatory(field string, base, class map[string]string, path string, o origins) map[string]string {
	merged := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(base)) {
		merged[k] = base[k]
		o.set(path+"["+k+"]", OriginBaseline)
	}
	for _, k := range slices.Sorted(maps.Keys(class)) {
		if bv, ok := base[k]; ok {
			if bv != class[k] {
				r.conflict(fmt.Sprintf("spec.%s[%s]", field, k), fmt.Sprintf("class value %q contradicts the Baseline's mandatory value %q", class[k], bv))
			}
			continue
		}
		merged[k] = class[k]
		o.set(path+"["+k+"]", OriginClass)
	}
	if field == "labels" {
		merged[v1alpha1.LabelClass] = r.class.Name
		o.set(path+"["+v1alpha1.LabelClass+"]", OriginComputed("class"))
	}
	return merged
}

// validateLabels checks what the CRDs cannot afford to: every label's characters.
func (r *renderer) validateLabels(labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			r.invalid("spec.labels["+k+"]", strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			r.invalid("spec.labels["+k+"]", fmt.Sprintf("value %q: %s", labels[k], strings.Join(errs, "; ")))
		}
	}
}

// unionTaints unions taint layers by (key, effect); for the same (key, effect) the later
// layer's value wins. Order: first appearance.
func unionTaints(path string, o origins, layers ...layer[v1alpha1.Taints]) []corev1.Taint {
	var out []corev1.Taint
	index := map[string]int{}
	for _, l := range layers {
		for _, t := range l.value {
			id := t.Key + ":" + string(t.Effect)
			o.set(path+"["+id+"]", l.origin)
			if i, ok := index[id]; ok {
				out[i].Value = t.Value
				continue
			}
			index[id] = len(out)
			out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	return out
}

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
	t.archs, t.archOrigin = pickList(layer[[]v1alpha1.Architecture]{r.profile.Architectures, profileOrigin}, layer[[]v1alpha1.Architecture]{spec.Architectures, OriginClass})
	t.capacityTypes, t.ctOrigin = pickList(layer[[]v1alpha1.CapacityType]{r.profile.CapacityTypes, profileOrigin}, layer[[]v1alpha1.CapacityType]{spec.CapacityTypes, OriginClass})

	req := func(key string, op corev1.NodeSelectorOperator, origin Origin, values ...string) {
		t.requirements = append(t.requirements, originReq{karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}, origin})
	}
	req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, profileOrigin, OS)
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
	case shape.MinGeneration != nil:
		req(LabelInstanceGeneration, corev1.NodeSelectorOpGt, OriginClass, fmt.Sprint(*shape.MinGeneration-1))
	case !explicit && r.profile.MinGeneration != nil:
		req(LabelInstanceGeneration, corev1.NodeSelectorOpGt, profileOrigin, fmt.Sprint(*r.profile.MinGeneration-1))
	}
	r.rangeReqs(req, LabelInstanceCPU, "spec.instances.cpu", shape.CPU, OriginClass)
	if m := shape.Memory; m != nil {
		// Karpenter's instance-memory label is in MiB.
		mib := &v1alpha1.IntRange{}
		if m.Min != nil {
			mib.Min = ptr.To(int32((m.Min.Value() + (1<<20 - 1)) >> 20))
		}
		if m.Max != nil {
			mib.Max = ptr.To(int32(m.Max.Value() >> 20))
		}
		r.rangeReqs(req, LabelInstanceMemory, "spec.instances.memory", mib, OriginClass)
	}
	gpu := shape.GPU
	if gpu == nil {
		gpu = &v1alpha1.GPUShape{}
	}
	if gpu.Count != nil {
		r.rangeReqs(req, LabelGPUCount, "spec.instances.gpu.count", gpu.Count, OriginClass)
	} else {
		r.rangeReqs(req, LabelGPUCount, "spec.instances.gpu.count", r.profile.GPUCount, profileOrigin)
	}
	if maker, origin := pick(layer[string]{r.profile.GPUMaker, profileOrigin}, layer[string]{gpu.Manufacturer, OriginClass}); maker != "" {
		req(LabelGPUManufacturer, corev1.NodeSelectorOpIn, origin, maker)
	}
	if len(gpu.Names) > 0 {
		req(LabelGPUName, corev1.NodeSelectorOpIn, OriginClass, gpu.Names...)
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
	familyName         = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	typeName           = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)
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
		}{{"spec.instances.families", shape.Families, familyName}, {"spec.instances.excludeFamilies", shape.ExcludeFamilies, familyName}, {"spec.instances.types", shape.Types, typeName}} {
			for i, n := range names.list {
				if !names.re.MatchString(n) {
					r.invalid(fmt.Sprintf("%s[%d]", names.field, i), fmt.Sprintf("%q is not an instance family or type name", n))
				}
			}
		}
	}
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

// rangeReqs turns an inclusive range into Gt/Lt requirements.
func (r *renderer) rangeReqs(req func(string, corev1.NodeSelectorOperator, Origin, ...string), key, field string, rng *v1alpha1.IntRange, origin Origin) {
	if rng == nil {
		return
	}
	if rng.Min != nil && rng.Max != nil && *rng.Min > *rng.Max {
		r.invalid(field, fmt.Sprintf("min %d is greater than max %d", *rng.Min, *rng.Max))
		return
	}
	if rng.Min != nil && *rng.Min > 0 {
		req(key, corev1.NodeSelectorOpGt, origin, fmt.Sprint(*rng.Min-1))
	}
	if rng.Max != nil {
		req(key, corev1.NodeSelectorOpLt, origin, fmt.Sprint(*rng.Max+1))
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

// ladder builds the rungs and their weights.
func (r *renderer) ladder(t *template) []Rung {
	if len(t.archs) == 0 || len(t.capacityTypes) == 0 {
		return nil
	}
	rungs := ladder(r.class.Name, t.capacityTypes, t.archs, t.sliceKind, t.slices)
	if len(rungs) == 0 {
		return nil // resolveSlices has said why
	}
	if len(rungs) > MaxRungs {
		r.invalid("spec", fmt.Sprintf("renders %d rungs (%d capacity types x %d architectures and their %s); at most %d are allowed",
			len(rungs), len(t.capacityTypes), len(t.archs), t.sliceKind.Plural(), MaxRungs))
		return nil
	}
	ceiling := DefaultCeiling
	if w := r.class.Spec.Weighting; w != nil && w.Ceiling != nil {
		ceiling = *w.Ceiling
	}
	if err := r.weigh(t, rungs, ceiling); err != nil {
		r.invalid("spec.weighting.ceiling", err.Error())
		return nil
	}
	return rungs
}

// nodePool renders one rung.
func (r *renderer) nodePool(t *template, rung Rung) (*karpv1.NodePool, origins) {
	o := origins{}
	for k, v := range t.origins {
		o[k] = v
	}
	ladderOrigin := OriginComputed("ladder")

	labels := map[string]string{v1alpha1.LabelRung: rung.Name}
	o.set(tmplPath+".metadata.labels["+v1alpha1.LabelRung+"]", ladderOrigin)
	for k, v := range t.labels {
		labels[k] = v
	}

	reqs := rungRequirements(t, rung)
	requirements := make([]karpv1.NodeSelectorRequirementWithMinValues, len(reqs))
	keys := requirementKeys(reqs)
	for i, req := range reqs {
		requirements[i] = *req.DeepCopy()
		o.set(tmplPath+".spec.requirements["+keys[i]+"]", req.origin)
	}

	expire := t.expireAfter
	if rung.Fallback && t.fallbackExpire != "" && t.fallbackExpire != karpv1.Never && shorter(t.fallbackExpire, expire) {
		expire = t.fallbackExpire
		o.set(tmplPath+".spec.expireAfter", OriginComputed(fmt.Sprintf("fallbackExpireAfter from %s", t.fallbackOrigin)))
	}

	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: NodePoolAPIVersion, Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: rung.Name, Labels: r.ownerLabels()},
		Spec: karpv1.NodePoolSpec{
			Weight: ptr.To(rung.Weight),
			Limits: r.rungLimits(rung.Name),
			Template: karpv1.NodeClaimTemplate{
				ObjectMeta: karpv1.ObjectMeta{Labels: labels, Annotations: nilIfEmpty(t.annotations)},
				Spec: karpv1.NodeClaimTemplateSpec{
					Taints:                 t.taints,
					StartupTaints:          t.startupTaints,
					Requirements:           requirements,
					NodeClassRef:           &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: r.class.Name},
					ExpireAfter:            karpv1.MustParseNillableDuration(expire),
					TerminationGracePeriod: t.tgp,
				},
			},
			Disruption: karpv1.Disruption{
				ConsolidationPolicy: t.policy,
				ConsolidateAfter:    karpv1.MustParseNillableDuration(t.after),
				Budgets:             t.budgets,
			},
		},
	}
	o.set("apiVersion", OriginComputed("ladder"))
	o.set("kind", OriginComputed("ladder"))
	o.set("metadata", OriginComputed("class"))
	o.set("metadata.name", ladderOrigin)
	o.set("spec.weight", OriginComputed("weight("+rung.WeightReason+")"))
	o.set("spec.limits", OriginComputed("class limit split across rungs"))
	o.set(tmplPath+".spec.nodeClassRef", OriginComputed("class"))
	return np, o
}

// rungRequirements are a rung's requirements: its own slice first, so that explain reads
// like the ladder, then what every rung of the class shares.
func rungRequirements(t *template, rung Rung) []originReq {
	reqs := []originReq{
		{karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{string(rung.CapacityType)}}, t.ctOrigin},
		{karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(rung.Arch)}}, t.archOrigin},
	}
	switch rung.SliceKind {
	case SliceFamily:
		reqs = append(reqs, originReq{karpv1.NodeSelectorRequirementWithMinValues{Key: LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{rung.Slice}}, t.sliceOrigin})
	case SliceType:
		reqs = append(reqs, originReq{karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{rung.Slice}}, t.sliceOrigin})
	}
	return append(reqs, t.requirements...)
}

// plain drops the origins.
func plain(reqs []originReq) []karpv1.NodeSelectorRequirementWithMinValues {
	out := make([]karpv1.NodeSelectorRequirementWithMinValues, len(reqs))
	for i, r := range reqs {
		out[i] = r.NodeSelectorRequirementWithMinValues
	}
	return out
}

// requirementKeys names each requirement in paths: its key, or key,operator where one key
// appears more than once (as with Gt and Lt bounds).
func requirementKeys(reqs []originReq) []string {
	count := map[string]int{}
	for _, r := range reqs {
		count[r.Key]++
	}
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
		if count[r.Key] > 1 {
			keys[i] = r.Key + "," + string(r.Operator)
		}
	}
	return keys
}

func shorter(a, b string) bool {
	if b == karpv1.Never {
		return true
	}
	da, db := karpv1.MustParseNillableDuration(a), karpv1.MustParseNillableDuration(b)
	return *da.Duration < *db.Duration
}

// rungLimits splits the class-wide limit: each rung may use the class limit minus what
// the other rungs use now, never below zero.
func (r *renderer) rungLimits(rung string) karpv1.Limits {
	if len(r.class.Spec.Limits) == 0 {
		return nil
	}
	limits := karpv1.Limits{}
	for name, limit := range r.class.Spec.Limits {
		remaining := limit.DeepCopy()
		for other, usage := range r.opts.Usage {
			if other == rung {
				continue
			}
			if used, ok := usage[name]; ok {
				remaining.Sub(used)
			}
		}
		if remaining.Sign() < 0 {
			remaining = resource.MustParse("0")
		}
		limits[name] = remaining
	}
	return limits
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Objects are the EC2NodeClass, the NodePools in ladder order, then the NodeOverlays,
// each as CleanJSON.
func (r *Result) Objects() ([]map[string]any, error) {
	objs := []any{r.NodeClass}
	for _, np := range r.NodePools {
		objs = append(objs, np)
	}
	for _, ov := range r.NodeOverlays {
		objs = append(objs, ov)
	}
	docs := make([]map[string]any, len(objs))
	for i, o := range objs {
		doc, err := CleanJSON(o)
		if err != nil {
			return nil, err
		}
		docs[i] = doc
	}
	return docs, nil
}

// CleanJSON is an object as its JSON form, through json.Marshal (runtime's unstructured
// converter would turn a NillableDuration into base64 bytes), without status, null values
// or a null creationTimestamp. It is what the CLI prints and the controller applies.
func CleanJSON(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("marshalling %T: %w", obj, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	delete(doc, "status")
	if md, ok := doc["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	dropNulls(doc)
	return doc, nil
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if child == nil {
				delete(t, k)
				continue
			}
			dropNulls(child)
			if m, ok := child.(map[string]any); ok && len(m) == 0 && k != "spec" {
				delete(t, k)
			}
		}
	case []any:
		for _, child := range t {
			dropNulls(child)
		}
	}
}
