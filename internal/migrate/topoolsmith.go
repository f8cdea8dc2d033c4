package migrate

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// PoolsmithResult is the Baselines and WorkloadClasses that replace the v1 objects.
type PoolsmithResult struct {
	Baselines []*v1alpha1.Baseline
	Classes   []*v1alpha1.WorkloadClass
	Report    Report
}

// ToPoolsmith turns the v1 conversion into Baselines (one per distinct identity and
// network: role or instance profile, selectors, metadata options, and the other fields a
// class cannot change) and one WorkloadClass per NodePool. Each class takes the closest
// profile whose render is equivalent to the v1 NodePool, else Custom, and states its
// fields explicitly; the equivalence check then compares every rung with the NodePool.
func ToPoolsmith(v1 *Result) *PoolsmithResult {
	out := &PoolsmithResult{}
	classes := map[string]*awsv1.EC2NodeClass{}
	for _, nc := range v1.NodeClasses {
		classes[nc.Name] = nc
	}
	// Group node classes by what only a Baseline may hold.
	groupOf := map[string]string{}
	var keys []string
	members := map[string][]*awsv1.EC2NodeClass{}
	for _, nc := range v1.NodeClasses {
		k := identityKey(nc.Spec)
		if _, ok := members[k]; !ok {
			keys = append(keys, k)
		}
		members[k] = append(members[k], nc)
		groupOf[nc.Name] = k
	}
	// The group most NodePools use becomes the Baseline named default.
	uses := map[string]int{}
	for _, np := range v1.NodePools {
		if nc, ok := classes[np.Spec.Template.Spec.NodeClassRef.Name]; ok {
			uses[groupOf[nc.Name]]++
		}
	}
	main := ""
	for _, k := range keys {
		if main == "" || uses[k] > uses[main] {
			main = k
		}
	}
	baselines := map[string]*v1alpha1.Baseline{}
	for _, k := range keys {
		name := v1alpha1.DefaultBaselineName
		if k != main {
			name = "baseline-" + members[k][0].Name
		}
		b := &v1alpha1.Baseline{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Baseline"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.BaselineSpec{NodeClass: sharedSpec(members[k])},
		}
		baselines[k] = b
		out.Baselines = append(out.Baselines, b)
	}
	for _, np := range v1.NodePools {
		r := &reporter{source: "NodePool/" + np.Name}
		nc, ok := classes[np.Spec.Template.Spec.NodeClassRef.Name]
		if !ok {
			r.add(Error, "spec.template.spec.nodeClassRef", "EC2NodeClass %q is not in the input: a Baseline cannot be built for it", np.Spec.Template.Spec.NodeClassRef.Name)
			out.Report = append(out.Report, r.report...)
			continue
		}
		b := baselines[groupOf[nc.Name]]
		var chosen *v1alpha1.WorkloadClass
		var diffs []string
		closest := closestProfile(np)
		for _, profile := range []v1alpha1.Profile{closest, v1alpha1.ProfileCustom} {
			wc := classFor(np, nc, b, profile, r)
			res, err := render.Render(b, wc, render.Options{})
			if err != nil {
				diffs = []string{err.Error()}
				continue
			}
			if diffs = Equivalence(np, nc, res); len(diffs) == 0 || profile == v1alpha1.ProfileCustom {
				chosen = wc
				break
			}
			r.add(Info, "profile", "the closest profile, %s, would change the pool (%s): stated as Custom", closest, diffs[0])
		}
		if chosen == nil {
			r.add(Error, "spec", "cannot be rendered as a WorkloadClass: %s", strings.Join(diffs, "; "))
			out.Report = append(out.Report, r.report...)
			continue
		}
		r.add(Info, "profile", "becomes WorkloadClass %q with profile %s on Baseline %q", chosen.Name, chosen.Spec.Profile, b.Name)
		for _, d := range diffs {
			r.add(Warning, "equivalence", "%s", d)
		}
		out.Classes = append(out.Classes, chosen)
		out.Report = append(out.Report, r.report...)
	}
	return out
}

// identityKey is what only a Baseline may hold, as a comparable string.
func identityKey(s awsv1.EC2NodeClassSpec) string {
	id := s.DeepCopy()
	id.AMISelectorTerms, id.AMIFamily, id.Tags, id.BlockDeviceMappings = nil, nil, nil, nil
	id.UserData, id.Kubelet, id.DetailedMonitoring, id.InstanceStorePolicy = nil, nil, nil, nil
	b, _ := json.Marshal(id)
	return string(b)
}

// sharedSpec is a group's Baseline node class: its identity, and of the overridable
// fields what every member shares (AMI from the first, tags and kubelet keys all agree on).
func sharedSpec(group []*awsv1.EC2NodeClass) awsv1.EC2NodeClassSpec {
	spec := *group[0].Spec.DeepCopy()
	for _, nc := range group[1:] {
		for k, v := range spec.Tags {
			if nc.Spec.Tags[k] != v {
				delete(spec.Tags, k)
			}
		}
		for k, v := range spec.Kubelet {
			if o, ok := nc.Spec.Kubelet[k]; !ok || string(o.Raw) != string(v.Raw) {
				delete(spec.Kubelet, k)
			}
		}
		if !reflect.DeepEqual(nc.Spec.BlockDeviceMappings, spec.BlockDeviceMappings) {
			spec.BlockDeviceMappings = nil
		}
		if !reflect.DeepEqual(nc.Spec.UserData, spec.UserData) {
			spec.UserData = nil
		}
		if !reflect.DeepEqual(nc.Spec.DetailedMonitoring, spec.DetailedMonitoring) {
			spec.DetailedMonitoring = nil
		}
		if !reflect.DeepEqual(nc.Spec.InstanceStorePolicy, spec.InstanceStorePolicy) {
			spec.InstanceStorePolicy = nil
		}
	}
	return spec
}

// closestProfile guesses from a pool's requirements and taints.
func closestProfile(np *karpv1.NodePool) v1alpha1.Profile {
	for _, t := range np.Spec.Template.Spec.Taints {
		if t.Key == render.GPUTaintKey {
			return v1alpha1.ProfileGPU
		}
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		switch {
		case strings.HasPrefix(r.Key, "karpenter.k8s.aws/instance-gpu"):
			return v1alpha1.ProfileGPU
		case r.Key == awsv1.LabelInstanceCategory && r.Operator == corev1.NodeSelectorOpIn:
			if allIn(r.Values, "r", "x", "z", "u") {
				return v1alpha1.ProfileMemoryOptimized
			}
			if slices.Contains(r.Values, "t") {
				return v1alpha1.ProfileBurstableCI
			}
		}
	}
	return v1alpha1.ProfileGeneral
}

func allIn(values []string, allowed ...string) bool {
	for _, v := range values {
		if !slices.Contains(allowed, v) {
			return false
		}
	}
	return len(values) > 0
}

// classFor states the pool as a class: its ladder axes, its other requirements verbatim,
// and every NodePool field explicitly, so the profile only fills what the pool leaves open.
func classFor(np *karpv1.NodePool, nc *awsv1.EC2NodeClass, b *v1alpha1.Baseline, profile v1alpha1.Profile, r *reporter) *v1alpha1.WorkloadClass {
	name := np.Name
	if len(name) > 63 {
		name = render.ShortenName(name)
		r.add(Warning, "metadata.name", "longer than a class name may be: the class is %q", name)
	}
	t := np.Spec.Template
	wc := &v1alpha1.WorkloadClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WorkloadClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.WorkloadClassSpec{
			Profile:                profile,
			Labels:                 v1alpha1.NodeLabels(t.Labels),
			Annotations:            v1alpha1.NodeAnnotations(t.Annotations),
			Taints:                 taints(t.Spec.Taints),
			StartupTaints:          taints(t.Spec.StartupTaints),
			Limits:                 corev1.ResourceList(np.Spec.Limits),
			ExpireAfter:            ptr.To(t.Spec.ExpireAfter),
			FallbackExpireAfter:    ptr.To(karpv1.MustParseNillableDuration(karpv1.Never)),
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
			Disruption: &v1alpha1.Disruption{
				ConsolidationPolicy: np.Spec.Disruption.ConsolidationPolicy,
				ConsolidateAfter:    ptr.To(np.Spec.Disruption.ConsolidateAfter),
				Budgets:             np.Spec.Disruption.Budgets,
			},
		},
	}
	if b.Name != v1alpha1.DefaultBaselineName {
		wc.Spec.BaselineRef = &v1alpha1.BaselineReference{Name: b.Name}
	}
	for _, req := range t.Spec.Requirements {
		switch req.Key {
		case karpv1.CapacityTypeLabelKey:
			for _, v := range allowed(req, []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}) {
				wc.Spec.CapacityTypes = append(wc.Spec.CapacityTypes, v1alpha1.CapacityType(v))
			}
		case corev1.LabelArchStable:
			for _, v := range allowed(req, []string{"amd64", "arm64"}) {
				wc.Spec.Architectures = append(wc.Spec.Architectures, v1alpha1.Architecture(v))
			}
		default:
			wc.Spec.Requirements = append(wc.Spec.Requirements, v1alpha1.Requirement(req))
		}
	}
	if wc.Spec.Architectures == nil {
		wc.Spec.Architectures = []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64, v1alpha1.ArchitectureARM64}
	}
	if wc.Spec.CapacityTypes == nil {
		wc.Spec.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand}
		if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
			wc.Spec.CapacityTypes = append(wc.Spec.CapacityTypes, v1alpha1.CapacityTypeReserved)
		}
	}
	rungs := len(wc.Spec.Architectures) * len(wc.Spec.CapacityTypes)
	ceiling := int32(rungs)
	if w := ptr.Deref(np.Spec.Weight, 0); w >= ceiling {
		ceiling = w
	} else if w > 0 && profile == v1alpha1.ProfileCustom {
		r.add(Warning, "spec.weight", "%d is below the %d distinct weights the class's rungs need: the class's ceiling is %d", w, rungs, ceiling)
	}
	wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic, Ceiling: ptr.To(ceiling)}
	wc.Spec.NodeClass = overrides(nc.Spec, b.Spec.NodeClass)
	return wc
}

// allowed are the values of universe a requirement allows, in the requirement's order.
func allowed(req karpv1.NodeSelectorRequirementWithMinValues, universe []string) []string {
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		var out []string
		for _, v := range req.Values {
			if slices.Contains(universe, v) {
				out = append(out, v)
			}
		}
		return out
	case corev1.NodeSelectorOpNotIn:
		var out []string
		for _, v := range universe {
			if !slices.Contains(req.Values, v) {
				out = append(out, v)
			}
		}
		return out
	}
	return universe
}

func taints(ts []corev1.Taint) v1alpha1.Taints {
	var out v1alpha1.Taints
	for _, t := range ts {
		out = append(out, v1alpha1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

// overrides are the node class's differences from its Baseline that a class may carry.
func overrides(spec, base awsv1.EC2NodeClassSpec) *v1alpha1.NodeClassOverrides {
	o := &v1alpha1.NodeClassOverrides{}
	if !reflect.DeepEqual(spec.AMISelectorTerms, base.AMISelectorTerms) || !reflect.DeepEqual(spec.AMIFamily, base.AMIFamily) {
		o.AMISelectorTerms, o.AMIFamily = spec.AMISelectorTerms, spec.AMIFamily
	}
	for k, v := range spec.Tags {
		if _, ok := base.Tags[k]; !ok {
			if o.Tags == nil {
				o.Tags = v1alpha1.Tags{}
			}
			o.Tags[k] = v
		}
	}
	if !reflect.DeepEqual(spec.BlockDeviceMappings, base.BlockDeviceMappings) {
		o.BlockDeviceMappings = spec.BlockDeviceMappings
	}
	for k, v := range spec.Kubelet {
		if bv, ok := base.Kubelet[k]; !ok || string(bv.Raw) != string(v.Raw) {
			if o.Kubelet == nil {
				o.Kubelet = awsv1.KubeletConfiguration{}
			}
			o.Kubelet[k] = v
		}
	}
	if base.UserData == nil {
		o.UserData = spec.UserData
	}
	if !reflect.DeepEqual(spec.DetailedMonitoring, base.DetailedMonitoring) {
		o.DetailedMonitoring = spec.DetailedMonitoring
	}
	if !reflect.DeepEqual(spec.InstanceStorePolicy, base.InstanceStorePolicy) {
		o.InstanceStorePolicy = spec.InstanceStorePolicy
	}
	if reflect.DeepEqual(o, &v1alpha1.NodeClassOverrides{}) {
		return nil
	}
	return o
}
