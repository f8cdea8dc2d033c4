package render_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/headroom"
	"github.com/poolsmith/poolsmith/internal/render"
)

func withHeadroom(h v1alpha1.Headroom) func(*v1alpha1.WorkloadClass) {
	return func(wc *v1alpha1.WorkloadClass) { wc.Spec.Headroom = &h }
}

var podsHeadroom = render.HeadroomOptions{Now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}

// renderHeadroom renders with placeholder pods, or with --headroom=off when ho is the zero
// value.
func renderHeadroom(t *testing.T, b *v1alpha1.Baseline, wc *v1alpha1.WorkloadClass, ho render.HeadroomOptions) (*render.Result, error) {
	t.Helper()
	opts := render.Options{Headroom: ho}
	if !ho.Now.IsZero() || ho.Usage != nil {
		opts.Capabilities.Headroom = v1alpha1.HeadroomPods
	}
	return render.Render(b, wc, opts)
}

func TestHeadroomPlaceholderDeployment(t *testing.T) {
	wc := class("ci", v1alpha1.ProfileBurstableCI, withHeadroom(v1alpha1.Headroom{Replicas: ptr.To[int32](2),
		PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi"))}}),
		func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ci"}}
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/ci", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		})
	res, err := renderHeadroom(t, baseline(), wc, podsHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Headroom
	if h == nil || len(h.Objects) != 1 {
		t.Fatalf("headroom %+v", h)
	}
	d, ok := h.Objects[0].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("object %T, want a Deployment", h.Objects[0])
	}
	if d.Namespace != v1alpha1.DefaultHeadroomNamespace || d.Name != "ci-headroom" || *d.Spec.Replicas != 2 {
		t.Errorf("deployment %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	if h.Rung != res.NodePools[0].Name || d.Spec.Template.Spec.NodeSelector["karpenter.sh/nodepool"] != h.Rung {
		t.Errorf("pinned to %q (rung %q), want the top rung %q", d.Spec.Template.Spec.NodeSelector, h.Rung, res.NodePools[0].Name)
	}
	spec := d.Spec.Template.Spec
	if spec.PriorityClassName != v1alpha1.HeadroomPriorityClass || *spec.TerminationGracePeriodSeconds != 0 {
		t.Errorf("priority %q grace %d", spec.PriorityClassName, *spec.TerminationGracePeriodSeconds)
	}
	// Every NoSchedule/NoExecute taint of the rung is tolerated by key, value and effect;
	// none by a blanket Exists.
	for _, taint := range res.NodePools[0].Spec.Template.Spec.Taints {
		found := false
		for _, tol := range spec.Tolerations {
			if tol.Operator == corev1.TolerationOpExists {
				t.Errorf("blanket toleration %+v", tol)
			}
			found = found || (tol.Key == taint.Key && tol.Value == taint.Value && tol.Effect == taint.Effect && tol.Operator == corev1.TolerationOpEqual)
		}
		if !found && taint.Effect != corev1.TaintEffectPreferNoSchedule {
			t.Errorf("taint %+v is not tolerated", taint)
		}
	}
	if c := spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; c.String() != "1" {
		t.Errorf("cpu request %s", c.String())
	}
	if d.Labels[v1alpha1.LabelClass] != "ci" || d.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		t.Errorf("labels %v", d.Labels)
	}
	if !hasOrigin(res, "Deployment/poolsmith-headroom/ci-headroom", "spec.replicas", "computed:headroom-size") {
		t.Error("explain has no origin for the Deployment's replicas")
	}
}

// hasOrigin reports whether explain traces path of object to an origin starting with prefix.
func hasOrigin(res *render.Result, object, path, prefix string) bool {
	for _, f := range res.Provenance {
		if f.Object == object && f.Path == path {
			return strings.HasPrefix(string(f.Origin), prefix)
		}
	}
	return false
}

func TestHeadroomResolution(t *testing.T) {
	unit := &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1"))}
	for _, tc := range []struct {
		name     string
		base     *v1alpha1.Headroom
		class    *v1alpha1.Headroom
		ho       render.HeadroomOptions
		mutate   func(*v1alpha1.WorkloadClass)
		desired  int32
		none     bool
		reason   string
		shapeSrc string
		// manager is the manager's mechanism (Pods when empty); mechanism and kinds, when
		// set, what the class gets.
		manager, mechanism v1alpha1.HeadroomMechanism
		kinds              string
	}{
		{name: "no headroom anywhere", ho: podsHeadroom, none: true},
		{name: "a Baseline default", base: &v1alpha1.Headroom{Replicas: ptr.To[int32](3), PodShape: unit}, ho: podsHeadroom, desired: 3, shapeSrc: "baseline"},
		{name: "a class's replicas 0 turns the Baseline's off", base: &v1alpha1.Headroom{Replicas: ptr.To[int32](3)},
			class: &v1alpha1.Headroom{Replicas: ptr.To[int32](0)}, ho: podsHeadroom, none: true},
		{name: "size is one group: the class's replicas drop the Baseline's percentage", base: &v1alpha1.Headroom{Percentage: ptr.To[int32](50), PodShape: unit},
			class: &v1alpha1.Headroom{Replicas: ptr.To[int32](1)}, ho: render.HeadroomOptions{Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}}, desired: 1, shapeSrc: "baseline"},
		{name: "percentage of live usage", class: &v1alpha1.Headroom{Percentage: ptr.To[int32](20), PodShape: unit},
			ho: render.HeadroomOptions{Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("47")}}, desired: 10, shapeSrc: "class"},
		{name: "weighting's podShape is the default unit", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](1)}, ho: podsHeadroom, desired: 1,
			mutate: func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Weighting = &v1alpha1.Weighting{PodShape: &v1alpha1.PodShape{CPU: ptr.To(resource.MustParse("500m"))}}
			}, shapeSrc: "computed:weighting.podShape"},
		{name: "the typical pod otherwise", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](1)}, ho: podsHeadroom, desired: 1, shapeSrc: "computed:typical-pod of "},
		{name: "a closed window holds none", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit,
			Schedule: []v1alpha1.HeadroomWindow{{Start: "0 20 * * *", Duration: metav1.Duration{Duration: time.Hour}}}}, ho: podsHeadroom, desired: 0, reason: v1alpha1.HeadroomReasonClosed},
		{name: "the class's limits cap it", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](10), PodShape: unit}, ho: podsHeadroom,
			mutate: func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
			},
			desired: 4, reason: v1alpha1.HeadroomReasonCappedByClassLimits},
		{name: "--headroom=off renders none", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit}, ho: render.HeadroomOptions{}, desired: 0, reason: v1alpha1.HeadroomReasonDisabled},
		{name: "CapacityBuffer falls back to pods, reported", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit, Mechanism: v1alpha1.HeadroomCapacityBuffer},
			ho: podsHeadroom, desired: 2, reason: v1alpha1.HeadroomReasonMechanismFallback, mechanism: v1alpha1.HeadroomPods, kinds: "Deployment"},
		{name: "CapacityBuffer where the manager has it", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit, Mechanism: v1alpha1.HeadroomCapacityBuffer},
			ho: podsHeadroom, manager: v1alpha1.HeadroomCapacityBuffer, desired: 2, mechanism: v1alpha1.HeadroomCapacityBuffer, kinds: "PodTemplate CapacityBuffer"},
		{name: "Auto is the manager's CapacityBuffer", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit},
			ho: podsHeadroom, manager: v1alpha1.HeadroomCapacityBuffer, desired: 2, mechanism: v1alpha1.HeadroomCapacityBuffer, kinds: "PodTemplate CapacityBuffer"},
		{name: "Pods asked for where the manager has CapacityBuffer", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit, Mechanism: v1alpha1.HeadroomPods},
			ho: podsHeadroom, manager: v1alpha1.HeadroomCapacityBuffer, desired: 2, mechanism: v1alpha1.HeadroomPods, kinds: "Deployment"},
		{name: "a closed window holds a CapacityBuffer of 0", class: &v1alpha1.Headroom{Replicas: ptr.To[int32](2), PodShape: unit,
			Schedule: []v1alpha1.HeadroomWindow{{Start: "0 20 * * *", Duration: metav1.Duration{Duration: time.Hour}}}}, ho: podsHeadroom, manager: v1alpha1.HeadroomCapacityBuffer,
			desired: 0, reason: v1alpha1.HeadroomReasonClosed, mechanism: v1alpha1.HeadroomCapacityBuffer, kinds: "PodTemplate CapacityBuffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := baseline(func(b *v1alpha1.Baseline) { b.Spec.Headroom = tc.base })
			wc := class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Headroom = tc.class
				if tc.mutate != nil {
					tc.mutate(wc)
				}
			})
			opts := render.Options{Headroom: tc.ho}
			if !tc.ho.Now.IsZero() || tc.ho.Usage != nil {
				opts.Capabilities.Headroom = v1alpha1.HeadroomPods
				if tc.manager != "" {
					opts.Capabilities.Headroom, opts.Capabilities.HeadroomReason = tc.manager, "test"
				}
			}
			res, err := render.Render(b, wc, opts)
			if err != nil {
				t.Fatal(err)
			}
			h := res.Headroom
			if tc.none {
				if h != nil {
					t.Fatalf("headroom %+v, want none", h)
				}
				return
			}
			if h == nil || h.Desired != tc.desired || h.Reason != tc.reason || !strings.HasPrefix(h.ShapeFrom, tc.shapeSrc) {
				t.Fatalf("headroom %+v, want desired %d reason %q shape from %q", h, tc.desired, tc.reason, tc.shapeSrc)
			}
			if tc.reason == v1alpha1.HeadroomReasonDisabled && len(h.Objects) != 0 {
				t.Errorf("--headroom=off rendered %d objects", len(h.Objects))
			}
			var kinds []string
			for _, obj := range h.Objects {
				kinds = append(kinds, obj.GetObjectKind().GroupVersionKind().Kind)
			}
			if tc.mechanism != "" && (h.Mechanism != tc.mechanism || strings.Join(kinds, " ") != tc.kinds) {
				t.Errorf("mechanism %s with %v, want %s with %s", h.Mechanism, kinds, tc.mechanism, tc.kinds)
			}
			if tc.reason == v1alpha1.HeadroomReasonMechanismFallback && !strings.Contains(h.Message, "the manager runs with --headroom=pods") {
				t.Errorf("the fallback does not say why: %q", h.Message)
			}
		})
	}
}

func TestHeadroomInvalidNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     v1alpha1.Headroom
		field string
	}{
		{"no rung matches", v1alpha1.Headroom{Replicas: ptr.To[int32](1), Rung: &v1alpha1.RungSelector{CapacityType: v1alpha1.CapacityTypeReserved}}, "spec.headroom.rung: no rung of the class matches capacityType reserved"},
		{"a unit no type of the rung hosts", v1alpha1.Headroom{Replicas: ptr.To[int32](1), PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("500"))}}, "spec.headroom.podShape: cpu: 500 fits on no instance type rung"},
		{"an unknown time zone", v1alpha1.Headroom{Replicas: ptr.To[int32](1), Schedule: []v1alpha1.HeadroomWindow{{Start: "0 8 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Mars/Olympus"}}}, "spec.headroom.schedule[0].timeZone"},
		{"a window that never opens", v1alpha1.Headroom{Replicas: ptr.To[int32](1), Schedule: []v1alpha1.HeadroomWindow{{Start: "0 8 30 2 *", Duration: metav1.Duration{Duration: time.Hour}}}}, "spec.headroom.schedule[0].start: \"0 8 30 2 *\" never opens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wc := class("web", v1alpha1.ProfileGeneral, withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand), withHeadroom(tc.h))
			_, err := renderHeadroom(t, baseline(), wc, podsHeadroom)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want %q", err, tc.field)
			}
		})
	}
}

// The CapacityBuffer mechanism renders a PodTemplate of one unit, pinned and tolerating
// as the placeholder Deployment's pods are, and Karpenter's CapacityBuffer referring to
// it with Poolsmith's count in replicas (never percentage) and the resolved limits.
func TestHeadroomCapacityBuffer(t *testing.T) {
	wc := class("ci", v1alpha1.ProfileBurstableCI, withHeadroom(v1alpha1.Headroom{Percentage: ptr.To[int32](20), Replicas: ptr.To[int32](1),
		PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi"))},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}),
		func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ci"}}
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/ci", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		})
	opts := render.Options{Headroom: render.HeadroomOptions{Now: podsHeadroom.Now, Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}}}
	opts.Capabilities.Headroom = v1alpha1.HeadroomCapacityBuffer
	res, err := render.Render(baseline(), wc, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Headroom
	if h == nil || len(h.Objects) != 2 || h.Mechanism != v1alpha1.HeadroomCapacityBuffer {
		t.Fatalf("headroom %+v", h)
	}
	pt, ok1 := h.Objects[0].(*corev1.PodTemplate)
	cb, ok2 := h.Objects[1].(*cbv1beta1.CapacityBuffer)
	if !ok1 || !ok2 {
		t.Fatalf("objects %T, %T; want a PodTemplate then a CapacityBuffer", h.Objects[0], h.Objects[1])
	}
	for _, obj := range h.Objects {
		if obj.GetNamespace() != v1alpha1.DefaultHeadroomNamespace || obj.GetName() != "ci-headroom" ||
			obj.GetLabels()[v1alpha1.LabelClass] != "ci" || obj.GetLabels()[v1alpha1.LabelHeadroom] != "ci" || obj.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			t.Errorf("%T %s/%s labels %v", obj, obj.GetNamespace(), obj.GetName(), obj.GetLabels())
		}
	}
	// 20 % of 20 CPU is 4 units of 1 CPU, above replicas 1 and under limits 8.
	if cb.Spec.Replicas == nil || *cb.Spec.Replicas != 4 || h.Desired != 4 || cb.Spec.Percentage != nil || cb.Spec.ScalableRef != nil {
		t.Errorf("buffer spec %+v, want replicas 4 and no percentage", cb.Spec)
	}
	if cb.Spec.PodTemplateRef == nil || cb.Spec.PodTemplateRef.Name != pt.Name || cb.Spec.Limits[corev1.ResourceCPU] != resource.MustParse("8") {
		t.Errorf("buffer refers to %+v with limits %v", cb.Spec.PodTemplateRef, cb.Spec.Limits)
	}
	spec := pt.Template.Spec
	if spec.NodeSelector["karpenter.sh/nodepool"] != res.NodePools[0].Name || spec.PriorityClassName != "" {
		t.Errorf("template pinned to %v, priority class %q", spec.NodeSelector, spec.PriorityClassName)
	}
	for _, taint := range res.NodePools[0].Spec.Template.Spec.Taints {
		found := false
		for _, tol := range spec.Tolerations {
			found = found || (tol.Key == taint.Key && tol.Value == taint.Value && tol.Effect == taint.Effect && tol.Operator == corev1.TolerationOpEqual)
		}
		if !found && taint.Effect != corev1.TaintEffectPreferNoSchedule {
			t.Errorf("taint %+v is not tolerated", taint)
		}
	}
	if r := spec.Containers[0].Resources.Requests; r.Cpu().String() != "1" || r.Memory().String() != "2Gi" {
		t.Errorf("unit %v", r)
	}
	if !hasOrigin(res, "CapacityBuffer/poolsmith-headroom/ci-headroom", "spec.replicas", "computed:headroom-size") {
		t.Error("explain has no origin for the CapacityBuffer's replicas")
	}
}

// TestHeadroomGoldens holds both mechanisms' children for a restricted class with a
// taint, as render prints them (go test ./internal/render -run TestHeadroomGoldens
// -update). They are in a folder of their own: the acceptance suite's dry run of every
// golden object has no headroom namespace, and the controller tests write them to the API
// server instead.
func TestHeadroomGoldens(t *testing.T) {
	wc := class("ci", v1alpha1.ProfileBurstableCI, withHeadroom(v1alpha1.Headroom{Replicas: ptr.To[int32](2),
		PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi"))},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}),
		func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"ci"}}
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/ci", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		})
	for file, mechanism := range map[string]v1alpha1.HeadroomMechanism{"headroom/pods.yaml": v1alpha1.HeadroomPods, "headroom/capacitybuffer.yaml": v1alpha1.HeadroomCapacityBuffer} {
		t.Run(file, func(t *testing.T) {
			opts := render.Options{Headroom: podsHeadroom}
			opts.Capabilities.Headroom = mechanism
			res, err := render.Render(baseline(), wc, opts)
			if err != nil {
				t.Fatal(err)
			}
			var docs []string
			for _, obj := range res.Headroom.Objects {
				doc, err := render.CleanJSON(obj)
				if err != nil {
					t.Fatal(err)
				}
				out, err := yaml.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(out))
			}
			golden(t, file, strings.Join(docs, "---\n"))
		})
	}
}

// The unit is priced on its rung: the type PriceSource names, at the rung's capacity
// type, divided by the units one node of it holds.
func TestHeadroomUnitPrice(t *testing.T) {
	wc := class("ci", v1alpha1.ProfileBurstableCI, withHeadroom(v1alpha1.Headroom{Replicas: ptr.To[int32](2),
		PodShape: &v1alpha1.HeadroomPodShape{CPU: ptr.To(resource.MustParse("1")), Memory: ptr.To(resource.MustParse("2Gi"))}}))
	res, err := renderHeadroom(t, baseline(), wc, podsHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	h := res.Headroom
	ct, rest, _ := strings.Cut(h.PriceSource, " ")
	name, source, _ := strings.Cut(rest, ": ")
	ty, price := cat.Types[name], cat.Prices[catalog.DefaultRegion][name]
	if top := catalog.PinnedCapacityType(res.NodePools[0].Spec.Template.Spec.Requirements); ty == nil || ct != top || top != "spot" {
		t.Fatalf("unit price %v from %q; the top rung is %s", h.UnitPrice, h.PriceSource, top)
	}
	if want := price.SpotAvg / headroom.UnitsOf(ty, h.Shape); source != price.SpotSource || h.UnitPrice != want {
		t.Errorf("unit price %v from %q, want %v (%s spot %v / %v units) from %q", h.UnitPrice, h.PriceSource, want, name, price.SpotAvg, headroom.UnitsOf(ty, h.Shape), price.SpotSource)
	}
}
