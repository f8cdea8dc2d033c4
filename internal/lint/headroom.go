package lint

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/headroom"
	"github.com/poolsmith/poolsmith/internal/render"
)

// scheduleHorizon is how soon a headroom schedule must open for lint to stay quiet.
const scheduleHorizon = 8 * 24 * time.Hour

// checkHeadroom warns when the headroom asks for more than the class's limits allow at
// all, when its schedule does not open within 8 days (a leap-day start), and when a GPU
// class keeps the typical pod warm by default, a GPU per unit. It judges at
// opts.Headroom.Now, or the wall clock.
func checkHeadroom(c Class, opts render.Options, add adder) {
	h := c.Result.Headroom
	if h == nil {
		return
	}
	obj := "WorkloadClass/" + c.Class.Name
	if limits := c.Class.Spec.Limits; len(limits) > 0 {
		if fit, ok := headroom.LimitUnits(limits, h.Shape); ok && h.Asked > fit {
			add(Warning, obj, CheckHeadroomOverLimits, "spec.headroom asks for %d units of %s, but spec.limits hold at most %d: the rest is never held", h.Asked, shapeString(h.Shape), fit)
		}
	}
	now := opts.Headroom.Now
	if now.IsZero() {
		now = time.Now()
	}
	if len(h.Schedule) > 0 && !h.Schedule.OpensWithin(now, scheduleHorizon) {
		add(Warning, obj, CheckHeadroomScheduleClosed, "no spec.headroom.schedule window opens within 8 days of %s: the headroom is 0 until then", now.UTC().Format(time.RFC3339))
	}
	if c.Result.Profile == v1alpha1.ProfileGPU && strings.HasPrefix(h.ShapeFrom, string(render.OriginComputed("typical-pod"))) {
		add(Warning, obj, CheckHeadroomPodsCost, "the GPU profile's typical pod holds a GPU per unit warm (%s); set spec.headroom.podShape to say what the headroom is for", shapeString(h.Shape))
	}
}

func shapeString(l corev1.ResourceList) string {
	var parts []string
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, headroom.ResourceGPU} {
		if q, ok := l[name]; ok {
			parts = append(parts, string(name)+" "+q.String())
		}
	}
	return strings.Join(parts, ", ")
}
