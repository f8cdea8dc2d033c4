package headroom

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Hysteresis: a percentage-sized headroom grows at once, and shrinks only when it would
// still be too large with 25 % more usage (x / ShrinkBand), for ShrinkAfter without a break.
const (
	ShrinkBand  = 0.8
	ShrinkAfter = 10 * time.Minute
)

// Input is everything one sizing decision needs.
type Input struct {
	// Replicas and Percentage are the resolved spec.headroom size; 0 when unset.
	Replicas, Percentage int32
	// Shape is one unit's requests.
	Shape corev1.ResourceList
	// Limits are spec.headroom.limits; nil for none.
	Limits corev1.ResourceList
	// ClassRoom is what the class's spec.limits leave above its live nodes' capacity;
	// nil when the class has no limits.
	ClassRoom corev1.ResourceList
	// Usage is the class's live requests (placeholders and DaemonSet pods excluded).
	Usage corev1.ResourceList
	// Open is the schedule's state now.
	Open bool
	// Previous is the count last written, PendingSince when it was first found too large
	// (status.headroom); Now is the pass's clock.
	Previous     int32
	PendingSince *time.Time
	Now          time.Time
	// Fresh: a schedule edge or a spec change; hysteresis is skipped.
	Fresh bool
}

// Result is the decision.
type Result struct {
	// Desired is the unit count to render.
	Desired int32
	// Reason is empty, or HeadroomReasonClosed, CappedByLimits or CappedByClassLimits.
	Reason string
	// PendingSince is the shrink timer to keep in status; nil when no shrink is pending.
	PendingSince *time.Time
	// Percent is the percentage term before caps, for explain.
	Percent float64
	// Asked is max(replicas, ceil(percentage term)) before the caps: what lint compares
	// with the class's limits.
	Asked int32
}

// Size decides the unit count: max(replicas, ceil(percentage × usage units)) while the
// schedule is open, capped by the headroom's limits and the room the class's limits leave;
// a percentage-sized count then moves with hysteresis.
func Size(in Input) Result {
	if !in.Open {
		return Result{Reason: v1alpha1.HeadroomReasonClosed}
	}
	x := float64(in.Percentage) / 100 * UsageUnits(in.Usage, in.Shape)
	capped := func(n int32) (int32, string) {
		reason := ""
		if l, ok := LimitUnits(in.Limits, in.Shape); ok && l < n {
			n, reason = l, v1alpha1.HeadroomReasonCappedByLimits
		}
		if in.ClassRoom != nil {
			if l, ok := LimitUnits(in.ClassRoom, in.Shape); ok && l < n {
				n, reason = l, v1alpha1.HeadroomReasonCappedByClassLimits
			}
		}
		return n, reason
	}
	target, reason := capped(max(in.Replicas, ceil(x)))
	out := Result{Desired: target, Reason: reason, Percent: x, Asked: max(in.Replicas, ceil(x))}
	if in.Percentage == 0 || in.Fresh || target >= in.Previous {
		return out
	}
	// Shrinking: only once the count stays too large even with usage a quarter higher,
	// for ShrinkAfter.
	if still, _ := capped(max(in.Replicas, ceil(x/ShrinkBand))); still >= in.Previous {
		out.Desired = in.Previous
		return out
	}
	since := in.Now
	if in.PendingSince != nil {
		since = *in.PendingSince
	}
	if in.Now.Sub(since) >= ShrinkAfter {
		return out
	}
	out.Desired, out.PendingSince = in.Previous, &since
	return out
}

// ceil rounds up, ignoring float noise below 1e-9 (7.2/0.8 is 9, not 10).
func ceil(v float64) int32 {
	v = math.Ceil(math.Round(v*1e9) / 1e9)
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}

// UsageUnits is the usage in units: the largest, over the resources the shape names, of
// usage / shape. Fractional.
func UsageUnits(usage, shape corev1.ResourceList) float64 {
	units := 0.0
	for name, q := range shape {
		if q.Sign() <= 0 {
			continue
		}
		u := usage[name]
		units = math.Max(units, u.AsApproximateFloat64()/q.AsApproximateFloat64())
	}
	return units
}

// LimitUnits is how many units fit under limits: the smallest, over the resources both
// name, of floor(limit / shape), as Karpenter's CapacityBuffer helpers compute it. ok is
// false when they name no resource in common.
func LimitUnits(limits, shape corev1.ResourceList) (int32, bool) {
	n, ok := int64(math.MaxInt32), false
	for name, l := range limits {
		q, has := shape[name]
		if !has || q.Sign() <= 0 {
			continue
		}
		ok = true
		n = min(n, int64(math.Floor(math.Round(l.AsApproximateFloat64()/q.AsApproximateFloat64()*1e9)/1e9)))
	}
	return int32(max(n, 0)), ok
}
