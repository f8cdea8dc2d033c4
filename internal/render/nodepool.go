package render

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// nodePool renders one rung.
func (r *renderer) nodePool(t *template, rung Rung) (*karpv1.NodePool, origins) {
	o := origins{}
	for k, v := range t.origins {
		o[k] = v
	}
	ladderOrigin := OriginComputed("ladder")

	// The renderer's own labels are set last: they always win.
	labels := map[string]string{}
	for k, v := range t.labels {
		labels[k] = v
	}
	labels[v1alpha1.LabelRung] = rung.Name
	o.set(tmplPath+".metadata.labels["+v1alpha1.LabelRung+"]", ladderOrigin)

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
			Limits: r.rungLimits(rung.Name, requirements),
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
	switch {
	case r.opts.HoldAtUsage:
		o.set("spec.limits", OriginComputed("budget hold: the rung's status.resources"))
	case r.opts.BudgetLeft != nil:
		o.set("spec.limits", OriginComputed(fmt.Sprintf("class limit split across rungs, cpu at most what $%.4f/h left of the budget buys at the rung's dearest price per vCPU", *r.opts.BudgetLeft)))
	default:
		o.set("spec.limits", OriginComputed("class limit split across rungs"))
	}
	o.set(tmplPath+".spec.nodeClassRef", OriginComputed("class"))
	r.whenEmpty(t, rung, np, o)
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

// rungLimits splits the class-wide limit (spec.limits, or the Baseline's ceiling where the
// class sets none): each rung may use the class limit minus what the other rungs use now,
// never below zero; with budget left (Options.BudgetLeft), its CPU is capped at what that
// money buys on the rung.
func (r *renderer) rungLimits(rung string, reqs []karpv1.NodeSelectorRequirementWithMinValues) karpv1.Limits {
	classLimits, _ := ClassLimits(r.baseline, r.class)
	if r.opts.HoldAtUsage {
		return r.heldLimits(rung, classLimits)
	}
	limits := r.splitLimits(rung, classLimits)
	if r.opts.BudgetLeft == nil {
		return limits
	}
	perVCPU, ok := dearestPerVCPU(r.catalog, r.region, reqs)
	if !ok {
		return limits // no type of the rung has a price: nothing to buy, nothing to bound
	}
	budget := budgetCPU(*r.opts.BudgetLeft, perVCPU, r.opts.Usage[rung][corev1.ResourceCPU])
	if limits == nil {
		limits = karpv1.Limits{}
	}
	if cpu, set := limits[corev1.ResourceCPU]; !set || budget.Cmp(cpu) < 0 {
		limits[corev1.ResourceCPU] = budget
	}
	return limits
}

// budgetCPU is the most CPU a rung may hold with left US dollars per hour still to spend:
// what it uses plus the vCPUs left buys at perVCPU, in millicores rounded down. Karpenter
// launches a node only while the rung's CPU plus the node's stays within the limit, and
// no node of the rung costs more than its vCPUs times perVCPU, so what it launches under
// this limit costs at most left.
func budgetCPU(left, perVCPU float64, used resource.Quantity) resource.Quantity {
	milli := int64(0)
	if left > 0 && perVCPU > 0 {
		milli = int64(math.Floor(left / perVCPU * 1000))
	}
	q := resource.NewMilliQuantity(milli, resource.DecimalSI)
	q.Add(used)
	return *q
}

// dearestPerVCPU is the highest price per vCPU, US dollars per hour, of the catalog's
// types that requirements allow, priced at the capacity type they pin (spot: the regional
// average; on-demand and reserved: on demand); false when no allowed type has a price.
func dearestPerVCPU(cat *catalog.Catalog, region string, reqs []karpv1.NodeSelectorRequirementWithMinValues) (float64, bool) {
	spot := catalog.PinnedCapacityType(reqs) == karpv1.CapacityTypeSpot
	key := fmt.Sprintf("render.dearestPerVCPU\x00%s\x00%v", region, reqs)
	v := cat.Derived(key, func() any {
		prices, matcher := cat.Prices[region], catalog.NewMatcher(reqs)
		dearest := 0.0
		for name, t := range cat.Types {
			if t.VCPU <= 0 || !matcher.Matches(t) {
				continue
			}
			p := prices[name].OnDemand
			if spot {
				p = prices[name].SpotAvg
			}
			if p > 0 {
				dearest = math.Max(dearest, p/float64(t.VCPU))
			}
		}
		return dearest
	}).(float64)
	return v, v > 0
}

// splitLimits is the class limit split: each rung may use the class limit minus what the
// other rungs use now, never below zero; nil without a class limit.
func (r *renderer) splitLimits(rung string, classLimits corev1.ResourceList) karpv1.Limits {
	if len(classLimits) == 0 {
		return nil
	}
	limits := karpv1.Limits{}
	for name, limit := range classLimits {
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

// heldLimits freeze a rung at what it uses: CPU, memory and every resource the class
// limits (its own or the Baseline's ceiling), at the rung's status.resources (0 where it uses
// none), so no new node fits.
func (r *renderer) heldLimits(rung string, classLimits corev1.ResourceList) karpv1.Limits {
	limits := karpv1.Limits{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")}
	for name := range classLimits {
		limits[name] = resource.MustParse("0")
	}
	for name := range limits {
		if used, ok := r.opts.Usage[rung][name]; ok {
			limits[name] = used.DeepCopy()
		}
	}
	return limits
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
