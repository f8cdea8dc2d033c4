package migrate

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/render"
)

// Equivalence compares a class's render with the v1 NodePool and EC2NodeClass it replaces
// and lists every difference: the rungs must together allow exactly the pool's capacity
// types and architectures, and each must carry the pool's other requirements (as sets of
// allowed values), taints, startup taints, labels, annotations, limits and disruption
// settings; the node class must hold the same fields.
func Equivalence(np *karpv1.NodePool, nc *awsv1.EC2NodeClass, res *render.Result) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	t := np.Spec.Template

	// The ladder's axes.
	ctUniverse := []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		ctUniverse = append(ctUniverse, karpv1.CapacityTypeReserved)
	}
	want := map[string]bool{}
	cts, archs := ctUniverse, []string{"amd64", "arm64"}
	for _, r := range t.Spec.Requirements {
		switch r.Key {
		case karpv1.CapacityTypeLabelKey:
			cts = allowed(r, ctUniverse)
		case corev1.LabelArchStable:
			archs = allowed(r, archs)
		}
	}
	for _, ct := range cts {
		for _, a := range archs {
			want[ct+"/"+a] = true
		}
	}
	got := map[string]bool{}
	for _, r := range res.Rungs {
		got[string(r.CapacityType)+"/"+string(r.Arch)] = true
	}
	if !reflect.DeepEqual(want, got) {
		add("capacity types and architectures: the NodePool allows %v, the rungs %v", slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)))
	}

	others := requirementsBesideAxes(t.Spec.Requirements)
	for _, rung := range res.NodePools {
		rt := rung.Spec.Template
		mine := requirementsBesideAxes(rt.Spec.Requirements)
		for _, k := range union(others.Keys().UnsortedList(), mine.Keys().UnsortedList()) {
			if a, b := describe(others, k), describe(mine, k); a != b {
				add("rung %s: requirement %s is %s, the NodePool's %s", rung.Name, k, b, a)
			}
		}
		if a, b := taintSet(t.Spec.Taints), taintSet(rt.Spec.Taints); a != b {
			add("rung %s: taints %s, the NodePool's %s", rung.Name, b, a)
		}
		if a, b := taintSet(t.Spec.StartupTaints), taintSet(rt.Spec.StartupTaints); a != b {
			add("rung %s: startup taints %s, the NodePool's %s", rung.Name, b, a)
		}
		labels := map[string]string{}
		for k, v := range rt.Labels {
			if k != v1alpha1.LabelClass && k != v1alpha1.LabelRung {
				labels[k] = v
			}
		}
		if !equalMaps(t.Labels, labels) {
			add("rung %s: labels %v, the NodePool's %v", rung.Name, labels, t.Labels)
		}
		if !equalMaps(t.Annotations, rt.Annotations) {
			add("rung %s: annotations %v, the NodePool's %v", rung.Name, rt.Annotations, t.Annotations)
		}
		if !equalLimits(np.Spec.Limits, rung.Spec.Limits) {
			add("rung %s: limits %v, the NodePool's %v", rung.Name, rung.Spec.Limits, np.Spec.Limits)
		}
		if a, b := duration(t.Spec.ExpireAfter), duration(rt.Spec.ExpireAfter); a != b {
			add("rung %s: expireAfter %s, the NodePool's %s", rung.Name, b, a)
		}
		if !reflect.DeepEqual(t.Spec.TerminationGracePeriod, rt.Spec.TerminationGracePeriod) {
			add("rung %s: terminationGracePeriod %v, the NodePool's %v", rung.Name, rt.Spec.TerminationGracePeriod, t.Spec.TerminationGracePeriod)
		}
		d, rd := np.Spec.Disruption, rung.Spec.Disruption
		if d.ConsolidationPolicy != rd.ConsolidationPolicy || duration(d.ConsolidateAfter) != duration(rd.ConsolidateAfter) || !reflect.DeepEqual(d.Budgets, rd.Budgets) {
			add("rung %s: disruption %s/%s/%v, the NodePool's %s/%s/%v", rung.Name, rd.ConsolidationPolicy, duration(rd.ConsolidateAfter), rd.Budgets, d.ConsolidationPolicy, duration(d.ConsolidateAfter), d.Budgets)
		}
	}

	// The node class: the same fields, apart from the class tag Poolsmith adds and the
	// metadata options Karpenter would default anyway.
	orig, err := render.CleanJSON(nc.Spec)
	if err != nil {
		return append(out, err.Error())
	}
	rendered, err := render.CleanJSON(res.NodeClass.Spec)
	if err != nil {
		return append(out, err.Error())
	}
	if tags, ok := rendered["tags"].(map[string]any); ok {
		delete(tags, render.TagClass)
		if len(tags) == 0 {
			delete(rendered, "tags")
		}
	}
	// The API server fills Karpenter's metadata defaults the input leaves out; so does render.
	if nc.Spec.MetadataOptions == nil {
		delete(rendered, "metadataOptions")
	} else if mo, ok := orig["metadataOptions"].(map[string]any); ok {
		defaults, err := render.CleanJSON(render.KarpenterDefaultMetadataOptions())
		if err != nil {
			return append(out, err.Error())
		}
		for k, v := range defaults {
			if _, set := mo[k]; !set {
				mo[k] = v
			}
		}
	}
	for _, c := range append(diff.Changes(orig, rendered), diff.Changes(rendered, orig)...) {
		add("EC2NodeClass %s: %s", res.NodeClass.Name, c)
	}
	return out
}

func requirementsBesideAxes(reqs []karpv1.NodeSelectorRequirementWithMinValues) scheduling.Requirements {
	var rest []karpv1.NodeSelectorRequirementWithMinValues
	for _, r := range reqs {
		if r.Key != karpv1.CapacityTypeLabelKey && r.Key != corev1.LabelArchStable {
			rest = append(rest, r)
		}
	}
	return scheduling.NewNodeSelectorRequirementsWithMinValues(rest...)
}

func describe(reqs scheduling.Requirements, key string) string {
	if !reqs.Has(key) {
		return "unconstrained"
	}
	return reqs.Get(key).String()
}

func union(a, b []string) []string {
	set := map[string]bool{}
	for _, k := range append(a, b...) {
		set[k] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func taintSet(ts []corev1.Taint) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func equalLimits(a, b karpv1.Limits) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv.Cmp(v) != 0 {
			return false
		}
	}
	return true
}

func duration(d karpv1.NillableDuration) string {
	if d.Duration == nil {
		return karpv1.Never
	}
	return d.Duration.String()
}
