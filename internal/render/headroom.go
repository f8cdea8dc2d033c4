package render

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/headroom"
)

// DefaultHeadroomImage is the placeholder pods' container: it does nothing and asks for
// nothing beyond its requests.
const DefaultHeadroomImage = "registry.k8s.io/pause:3.10"

// HeadroomOptions are what sizes a class's headroom and what its placeholders run; the
// mechanism and the namespace are Capabilities (the manager's --headroom and
// --headroom-namespace).
type HeadroomOptions struct {
	// Image of the placeholder container; default DefaultHeadroomImage.
	Image string
	// Now evaluates the schedule and the shrink timer; zero treats every schedule as open.
	Now time.Time
	// Usage is the class's live requests (pods on its nodes, placeholders and DaemonSet
	// pods excluded), what a percentage is of; nil counts as none.
	Usage corev1.ResourceList
}

// Headroom is a class's resolved spec.headroom and the children that hold it.
type Headroom struct {
	// Mechanism is what was rendered: Pods, CapacityBuffer or Off.
	Mechanism v1alpha1.HeadroomMechanism
	// Rung is the NodePool the units are pinned to.
	Rung string
	// Shape is one unit's requests; ShapeFrom says where it came from.
	Shape     corev1.ResourceList
	ShapeFrom string
	// Desired is the unit count rendered; Asked the count the size asks for before the
	// caps; Reason why Desired is not Asked, or why nothing is held; Message, when set,
	// says why in words (MechanismFallback: why the manager holds no CapacityBuffer).
	Desired, Asked  int32
	Reason, Message string
	// Schedule is the resolved spec.headroom.schedule.
	Schedule headroom.Schedule
	// Window and NextChange describe the schedule; PendingSince is the shrink timer.
	Window       string
	NextChange   time.Time
	PendingSince *time.Time
	// UnitPrice is what one unit costs per hour on the rung (cost.PerUnit), and
	// PriceSource names the type and where its price came from; 0 and "" when the rung's
	// types have no price in the region.
	UnitPrice   float64
	PriceSource string
	// Objects are the children, in the headroom namespace: the placeholder Deployment
	// (Pods), or the PodTemplate and the CapacityBuffer that refers to it (CapacityBuffer).
	Objects []client.Object
}

// HeadroomName is the name of a class's headroom children: the Deployment, the
// PodTemplate and the CapacityBuffer (three kinds, so one name serves).
func HeadroomName(class string) string { return class + "-headroom" }

// CapacityBufferGVK is Karpenter's CapacityBuffer as v1.15.0 serves it.
var CapacityBufferGVK = schema.GroupVersionKind{Group: cbv1beta1.Group, Version: "v1beta1", Kind: "CapacityBuffer"}

// headroomSpec resolves spec.headroom: the size (replicas and percentage) as one group
// from the class, else the Baseline; the shape as one group (class < Baseline < weighting's
// podShape < the typical pod); limits, rung and mechanism field by field; the schedule as
// a list. A nil result means no headroom.
func (r *renderer) headroomSpec(add func(path, value string, origin Origin)) (*v1alpha1.Headroom, map[string]Origin) {
	var c, b v1alpha1.Headroom
	if r.class.Spec.Headroom != nil {
		c = *r.class.Spec.Headroom
	}
	if r.baseline.Spec.Headroom != nil {
		b = *r.baseline.Spec.Headroom
	}
	if r.class.Spec.Headroom == nil && r.baseline.Spec.Headroom == nil {
		return nil, nil
	}
	out := &v1alpha1.Headroom{}
	origins := map[string]Origin{}
	size := func(h v1alpha1.Headroom) bool { return h.Replicas != nil || h.Percentage != nil }
	switch {
	case size(c):
		out.Replicas, out.Percentage, origins["size"] = c.Replicas, c.Percentage, OriginClass
	case size(b):
		out.Replicas, out.Percentage, origins["size"] = b.Replicas, b.Percentage, OriginBaseline
	default:
		return nil, nil
	}
	if ptr.Deref(out.Replicas, 0) == 0 && out.Percentage == nil {
		add("spec.headroom.replicas", "0", origins["size"])
		return nil, nil
	}
	shape, shapeOrigin := pick(
		layer[*v1alpha1.HeadroomPodShape]{headroom.FromPodShape(r.podShape()), OriginComputed("weighting.podShape")},
		layer[*v1alpha1.HeadroomPodShape]{b.PodShape, OriginBaseline},
		layer[*v1alpha1.HeadroomPodShape]{c.PodShape, OriginClass})
	out.PodShape, origins["podShape"] = shape, shapeOrigin
	limits, o := pick(layer[*corev1.ResourceList]{nonEmpty(b.Limits), OriginBaseline}, layer[*corev1.ResourceList]{nonEmpty(c.Limits), OriginClass})
	if limits != nil {
		out.Limits, origins["limits"] = *limits, o
	}
	out.Rung, origins["rung"] = pick(layer[*v1alpha1.RungSelector]{b.Rung, OriginBaseline}, layer[*v1alpha1.RungSelector]{c.Rung, OriginClass})
	out.Mechanism, origins["mechanism"] = pick(
		layer[v1alpha1.HeadroomMechanism]{v1alpha1.HeadroomAuto, OriginPoolsmithDefault},
		layer[v1alpha1.HeadroomMechanism]{b.Mechanism, OriginBaseline},
		layer[v1alpha1.HeadroomMechanism]{c.Mechanism, OriginClass})
	out.Schedule, origins["schedule"] = pickList(layer[[]v1alpha1.HeadroomWindow]{b.Schedule, OriginBaseline}, layer[[]v1alpha1.HeadroomWindow]{c.Schedule, OriginClass})
	return out, origins
}

func nonEmpty(l corev1.ResourceList) *corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	return &l
}

// headroom resolves and sizes the class's headroom and renders its children. Errors are
// InvalidSpec on the spec.headroom field at fault, the same text in the manager and the CLI.
func (r *renderer) headroom(t *template, rungs []Rung, add func(path, value string, origin Origin)) *Headroom {
	spec, origins := r.headroomSpec(add)
	if spec == nil {
		return nil
	}
	ho := r.opts.Headroom
	// Everything is resolved and judged whatever the manager's mode, so the manager and
	// the CLI refuse the same specs; only the children depend on it.
	h := &Headroom{}
	var mechanismFrom Origin
	h.Mechanism, mechanismFrom, h.Reason, h.Message = headroomMechanism(spec.Mechanism, origins["mechanism"], r.opts.Capabilities)
	off := h.Mechanism == v1alpha1.HeadroomOff
	add("headroom.mechanism", string(h.Mechanism), mechanismFrom)

	rung, ok := selectRung(rungs, spec.Rung)
	if !ok {
		r.invalid("spec.headroom.rung", fmt.Sprintf("no rung of the class matches %s", describeRungSelector(spec.Rung)))
		return nil
	}
	h.Rung = rung.Name
	add("spec.headroom.rung", rung.Name, originOr(origins["rung"], OriginComputed("top rung")))

	types := r.rungTypes(t, rung)
	if spec.PodShape != nil {
		h.Shape, h.ShapeFrom = headroom.Shape(spec.PodShape), string(origins["podShape"])
	} else {
		shape, from, ok := headroom.TypicalPod(types, r.profileName == v1alpha1.ProfileGPU)
		if !ok {
			r.invalid("spec.headroom.podShape", fmt.Sprintf("rung %s allows no instance type the typical pod can be taken from; set a podShape", rung.Name))
			return nil
		}
		h.Shape, h.ShapeFrom = shape, string(OriginComputed("typical-pod of "+from))
	}
	add("spec.headroom.podShape", describeShape(h.Shape), Origin(h.ShapeFrom))
	_, cpu := h.Shape[corev1.ResourceCPU]
	_, mem := h.Shape[corev1.ResourceMemory]
	_, gpu := h.Shape[headroom.ResourceGPU]
	fits := !cpu && !mem && !gpu // extended resources alone: the catalog cannot judge them
	for _, ty := range types {
		if headroom.UnitsOf(ty, h.Shape) >= 1 {
			fits = true
			break
		}
	}
	if !fits {
		r.invalid("spec.headroom.podShape", fmt.Sprintf("%s fits on no instance type rung %s allows, after Karpenter's overhead", describeShape(h.Shape), rung.Name))
		return nil
	}

	h.UnitPrice, h.PriceSource, _ = cost.PerUnit(r.catalog, r.region, plain(rungRequirements(t, rung)), func(ty *catalog.InstanceType) float64 {
		return headroom.UnitsOf(ty, h.Shape)
	})

	now := ho.Now
	sched, err := headroom.ParseSchedule(spec.Schedule, nowOr(now))
	if err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		r.invalid(field, msg)
		return nil
	}
	state := headroom.State{Open: true}
	if !now.IsZero() {
		state = sched.At(now)
	}
	h.Window, h.NextChange = state.Describe(), state.Next
	if len(spec.Schedule) > 0 {
		add("spec.headroom.schedule", h.Window, origins["schedule"])
	}

	prev := r.class.Status.Headroom
	in := headroom.Input{
		Replicas: ptr.Deref(spec.Replicas, 0), Percentage: ptr.Deref(spec.Percentage, 0),
		Shape: h.Shape, Limits: spec.Limits, ClassRoom: r.classRoom(), Usage: ho.Usage,
		Open: state.Open, Now: now,
		Fresh: prev == nil || r.class.Generation != r.class.Status.ObservedGeneration || (prev.Reason == v1alpha1.HeadroomReasonClosed) == state.Open,
	}
	if prev != nil {
		in.Previous = prev.Desired
		if prev.ShrinkPendingSince != nil {
			in.PendingSince = ptr.To(prev.ShrinkPendingSince.Time)
		}
	}
	size := headroom.Size(in)
	h.Desired, h.PendingSince, h.Asked, h.Schedule = size.Desired, size.PendingSince, size.Asked, sched
	if off {
		h.Desired = 0
	}
	if size.Reason != "" && !off {
		h.Reason, h.Message = size.Reason, ""
	}
	add("spec.headroom.replicas", fmt.Sprint(in.Replicas), origins["size"])
	if in.Percentage > 0 {
		add("spec.headroom.percentage", fmt.Sprint(in.Percentage), origins["size"])
	}
	if len(spec.Limits) > 0 {
		add("spec.headroom.limits", describeShape(spec.Limits), origins["limits"])
	}
	add("headroom.desired", fmt.Sprint(h.Desired), OriginComputed(fmt.Sprintf("headroom-size (replicas %d, %d %% of %.2f units requested, %s)", in.Replicas, in.Percentage, headroom.UsageUnits(in.Usage, h.Shape), h.Window)))

	switch h.Mechanism {
	case v1alpha1.HeadroomPods:
		h.Objects = []client.Object{r.headroomDeployment(t, h, ho)}
	case v1alpha1.HeadroomCapacityBuffer:
		h.Objects = []client.Object{r.headroomPodTemplate(t, h, ho), r.headroomBuffer(h, spec.Limits)}
	}
	return h
}

// origins are where a headroom child's fields come from, for explain.
func (h *Headroom) origins(kind string) origins {
	o := origins{}
	o.set("", OriginComputed("headroom"))
	o.set("metadata", OriginComputed("class"))
	pod := "spec.template."
	switch kind {
	case "PodTemplate":
		pod = "template."
	case CapacityBufferGVK.Kind:
		o.set("spec.replicas", OriginComputed("headroom-size"))
		o.set("spec.limits", OriginComputed("spec.headroom.limits"))
		return o
	}
	o.set("spec.replicas", OriginComputed("headroom-size"))
	o.set(pod+"spec.nodeSelector", OriginComputed("headroom rung "+h.Rung))
	o.set(pod+"spec.tolerations", OriginComputed("the class's taints"))
	o.set(pod+"spec.containers[pause].resources", Origin(h.ShapeFrom))
	return o
}

// headroomMechanism is what holds a class's headroom, where that choice comes from, and
// the status reason and message it gives: nothing with --headroom=off; placeholder pods
// when the class asks for them; otherwise the manager's mechanism (--headroom, auto
// resolved at start). A class that asks for CapacityBuffer where the manager holds none
// gets placeholder pods, reported as MechanismFallback with the manager's reason.
func headroomMechanism(asked v1alpha1.HeadroomMechanism, askedFrom Origin, caps capabilities.Capabilities) (m v1alpha1.HeadroomMechanism, from Origin, reason, message string) {
	manager := OriginComputed("--headroom=" + strings.ToLower(string(caps.Headroom)))
	switch {
	case !caps.HeadroomOn():
		return v1alpha1.HeadroomOff, OriginComputed("--headroom=off"), v1alpha1.HeadroomReasonDisabled, ""
	case asked == v1alpha1.HeadroomPods:
		return v1alpha1.HeadroomPods, askedFrom, "", ""
	case caps.Headroom == v1alpha1.HeadroomCapacityBuffer && asked == v1alpha1.HeadroomCapacityBuffer:
		return v1alpha1.HeadroomCapacityBuffer, askedFrom, "", ""
	case caps.Headroom == v1alpha1.HeadroomCapacityBuffer:
		return v1alpha1.HeadroomCapacityBuffer, manager, "", ""
	case asked == v1alpha1.HeadroomCapacityBuffer:
		return v1alpha1.HeadroomPods, OriginComputed("CapacityBuffer unavailable"), v1alpha1.HeadroomReasonMechanismFallback,
			fmt.Sprintf("spec.headroom.mechanism asks for CapacityBuffer, but the manager holds none (%s): placeholder pods hold the headroom", caps.HeadroomWhy())
	}
	return v1alpha1.HeadroomPods, manager, "", ""
}

func originOr(o, fallback Origin) Origin {
	if o == "" {
		return fallback
	}
	return o
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// selectRung is the most preferred rung matching every field the selector sets; the top
// rung without one.
func selectRung(rungs []Rung, sel *v1alpha1.RungSelector) (Rung, bool) {
	for _, rung := range rungs {
		if sel == nil || ((sel.CapacityType == "" || sel.CapacityType == rung.CapacityType) &&
			(sel.Arch == "" || sel.Arch == rung.Arch) && (sel.Slice == "" || sel.Slice == rung.Slice)) {
			return rung, true
		}
	}
	return Rung{}, false
}

func describeRungSelector(sel *v1alpha1.RungSelector) string {
	var parts []string
	if sel.CapacityType != "" {
		parts = append(parts, "capacityType "+string(sel.CapacityType))
	}
	if sel.Arch != "" {
		parts = append(parts, "arch "+string(sel.Arch))
	}
	if sel.Slice != "" {
		parts = append(parts, "slice "+sel.Slice)
	}
	return strings.Join(parts, ", ")
}

// describeShape prints requests in a stable order: cpu, memory, then the others by name.
func describeShape(l corev1.ResourceList) string {
	var parts []string
	for _, name := range sortedResourceNames(l) {
		q := l[name]
		parts = append(parts, string(name)+": "+q.String())
	}
	return strings.Join(parts, ", ")
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := l[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range l {
		if n != corev1.ResourceCPU && n != corev1.ResourceMemory {
			rest = append(rest, string(n))
		}
	}
	slices.Sort(rest)
	for _, n := range rest {
		names = append(names, corev1.ResourceName(n))
	}
	return names
}

// rungTypes are the catalog's types the rung allows.
func (r *renderer) rungTypes(t *template, rung Rung) []*catalog.InstanceType {
	matcher := catalog.NewMatcher(plain(rungRequirements(t, rung)))
	var out []*catalog.InstanceType
	for _, ty := range r.catalog.Types {
		if !ty.PriceOnly && matcher.Matches(ty) {
			out = append(out, ty)
		}
	}
	return out
}

// classRoom is what the class's spec.limits leave above what all its NodePools use (their
// status.resources, Options.Usage): the split with no rung left out (0 while held). nil
// when the class has no limits.
func (r *renderer) classRoom() corev1.ResourceList {
	classLimits, _ := ClassLimits(r.baseline, r.class)
	if r.opts.HoldAtUsage {
		return corev1.ResourceList(r.heldLimits("", classLimits))
	}
	return corev1.ResourceList(r.splitLimits("", classLimits))
}

// headroomPod is the pod every headroom unit is: pause, requesting one unit (GPUs and
// extended resources as requests and limits alike), pinned to the rung, tolerating the
// class's taints by key, value and effect (never a blanket toleration), under the
// restricted Pod Security profile, with no service-account token. Every field the API
// server would default is rendered, so that the plan compares like with like (a
// built-in kind has no CRD schema to default it in-process). The Deployment adds the
// PriorityClass; the PodTemplate's virtual pods need none (Karpenter gives them the
// lowest priority itself).
func (r *renderer) headroomPod(t *template, h *Headroom, ho HeadroomOptions) corev1.PodTemplateSpec {
	image := ho.Image
	if image == "" {
		image = DefaultHeadroomImage
	}
	var tolerations []corev1.Toleration
	for _, taint := range t.taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerations = append(tolerations, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect})
	}
	requests := h.Shape.DeepCopy()
	var limits corev1.ResourceList
	for name, q := range requests {
		// Extended resources and GPUs must be requested and limited alike.
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			if limits == nil {
				limits = corev1.ResourceList{}
			}
			limits[name] = q.DeepCopy()
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelHeadroom: r.class.Name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			DNSPolicy:                     corev1.DNSClusterFirst,
			SchedulerName:                 corev1.DefaultSchedulerName,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			NodeSelector:                  map[string]string{"karpenter.sh/nodepool": h.Rung},
			Tolerations:                   tolerations,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65535),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:                     "pause",
				Image:                    image,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources:                corev1.ResourceRequirements{Requests: requests, Limits: limits},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// headroomMeta is a headroom child's metadata: in the headroom namespace, labelled as the
// class's and with the class's name in poolsmith.dev/headroom.
func (r *renderer) headroomMeta() metav1.ObjectMeta {
	labels := r.ownerLabels()
	labels[v1alpha1.LabelHeadroom] = r.class.Name
	return metav1.ObjectMeta{Name: HeadroomName(r.class.Name), Namespace: r.opts.Capabilities.HeadroomNamespaceOrDefault(), Labels: labels}
}

// headroomDeployment is the placeholder Deployment (Pods): headroomPod at the negative
// priority of the chart's PriorityClass, replicas the sized count.
func (r *renderer) headroomDeployment(t *template, h *Headroom, ho HeadroomOptions) *appsv1.Deployment {
	pod := r.headroomPod(t, h, ho)
	pod.Spec.PriorityClassName = v1alpha1.HeadroomPriorityClass
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: r.headroomMeta(),
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To(h.Desired),
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
			Selector:                &metav1.LabelSelector{MatchLabels: pod.Labels},
			// A shape change must not hold old and new units at once.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: pod,
		},
	}
}

// headroomPodTemplate is the CapacityBuffer's unit: headroomPod as a PodTemplate, which
// Karpenter reads to build the buffer's virtual pods (no pod is ever made of it).
func (r *renderer) headroomPodTemplate(t *template, h *Headroom, ho HeadroomOptions) *corev1.PodTemplate {
	return &corev1.PodTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PodTemplate"},
		ObjectMeta: r.headroomMeta(),
		Template:   r.headroomPod(t, h, ho),
	}
}

// headroomBuffer is Karpenter's CapacityBuffer of the class's PodTemplate: replicas the
// count Poolsmith sized (never percentage, which Karpenter applies only to a scalableRef),
// limits the resolved spec.headroom.limits, which the count already respects, so
// Karpenter's min() of the two is the count. provisioningStrategy is rendered as the CRD
// defaults it, so the plan compares like with like.
func (r *renderer) headroomBuffer(h *Headroom, limits corev1.ResourceList) *cbv1beta1.CapacityBuffer {
	return &cbv1beta1.CapacityBuffer{
		TypeMeta:   metav1.TypeMeta{APIVersion: CapacityBufferGVK.GroupVersion().String(), Kind: CapacityBufferGVK.Kind},
		ObjectMeta: r.headroomMeta(),
		Spec: cbv1beta1.CapacityBufferSpec{
			ProvisioningStrategy: ptr.To(cbv1beta1.ActiveProvisioningStrategy),
			PodTemplateRef:       &cbv1beta1.LocalObjectRef{Name: HeadroomName(r.class.Name)},
			Replicas:             ptr.To(h.Desired),
			Limits:               cbv1beta1.Limits(limits.DeepCopy()),
		},
	}
}
