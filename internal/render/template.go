package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

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

	r.checkLabels("baseline.spec.nodePool.labels", bnp.Labels)
	r.checkLabels("spec.labels", spec.Labels)
	t.labels = r.mergeMandatory("labels", bnp.Labels, spec.Labels, tmplPath+".metadata.labels", o)
	t.annotations = r.mergeMandatory("annotations", bnp.Annotations, spec.Annotations, tmplPath+".metadata.annotations", o)

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
	r.checkReservedTaints()
	if r.restricted() {
		t.taints = append(t.taints, accessTaint(r.class.Name))
		o.set(tmplPath+".spec.taints["+v1alpha1.TaintAccess+":"+string(corev1.TaintEffectNoExecute)+"]", OriginComputed("access"))
	}

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

// checkLabels checks one layer's labels under that layer's own field, so an error names
// the object that holds the bad label (a Baseline's label is not the class's fault). It
// refuses, as admission does, keys in Poolsmith's own domain (poolsmith.dev/class and
// poolsmith.dev/rung are the renderer's, and a class or Baseline value would silently
// relabel every rung), and checks what the CRDs cannot afford to: every label's characters.
func (r *renderer) checkLabels(field string, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		path := field + "[" + k + "]"
		if domain, _, ok := strings.Cut(k, "/"); ok && strings.HasSuffix(domain, v1alpha1.GroupVersion.Group) {
			r.invalid(path, "the poolsmith.dev label domain is reserved for the labels Poolsmith sets (poolsmith.dev/class, poolsmith.dev/rung)")
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			r.invalid(path, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			r.invalid(path, fmt.Sprintf("value %q: %s", labels[k], strings.Join(errs, "; ")))
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
