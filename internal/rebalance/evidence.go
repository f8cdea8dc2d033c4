package rebalance

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// Rung is one NodePool of the class, with the evidence of whether Karpenter can be
// expected to launch on it.
type Rung struct {
	Name     string
	Weight   int32
	NodePool *karpv1.NodePool
	// Spot: the rung launches spot capacity.
	Spot bool
	// SignalsProblem says why spot signals cannot be trusted now; "" when they are fresh.
	SignalsProblem string
	// Bucket is the lowest spot-interruption bucket among the rung's instance types, by
	// the signals: the pools EC2's price-capacity-optimized allocation favours.
	Bucket catalog.Bucket
	// LastCapacityError is when a NodeClaim of the rung last failed to launch for
	// capacity (Karpenter's InsufficientCapacityError event); zero when none did.
	LastCapacityError time.Time
}

// SignalsProblem is a spot rung's evidence from the signals' freshness: "" only when
// they are Fresh, so signals the WorkloadClass controller reports Stale (too old, undated
// or dated in the future) or Missing never justify a move.
func SignalsProblem(f signals.Freshness) string {
	if f.Status == string(metav1.ConditionTrue) {
		return ""
	}
	return f.Reason + ": " + f.Message
}

// NewRung reads a NodePool's weight and capacity type.
func NewRung(np *karpv1.NodePool) Rung {
	r := Rung{Name: np.Name, NodePool: np, Bucket: catalog.BucketUnknown}
	if np.Spec.Weight != nil {
		r.Weight = *np.Spec.Weight
	}
	for _, req := range np.Spec.Template.Spec.Requirements {
		if req.Key == karpv1.CapacityTypeLabelKey && req.Operator == corev1.NodeSelectorOpIn {
			r.Spot = slices.Contains(req.Values, karpv1.CapacityTypeSpot)
		}
	}
	return r
}

// requirements are what every node of the rung satisfies: its requirements and labels.
func (r Rung) requirements() scheduling.Requirements {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(r.NodePool.Spec.Template.Spec.Requirements...)
	reqs.Add(scheduling.NewLabelRequirements(r.NodePool.Spec.Template.Labels).Values()...)
	return reqs
}

// Hosts says whether every pod that would move could run on the rung, by Karpenter's
// own requirement compatibility (node selectors and required node affinity).
func (r Rung) Hosts(pods []*corev1.Pod) bool {
	reqs := r.requirements()
	for _, p := range pods {
		if reqs.Compatible(scheduling.NewStrictPodRequirements(p), scheduling.AllowUndefinedWellKnownLabels) != nil {
			return false
		}
	}
	return true
}

// Unavailable says why Karpenter cannot be expected to launch a node with capacity need
// on the rung now; "" when it can.
func (r Rung) Unavailable(s Settings, now time.Time, need corev1.ResourceList) string {
	np := r.NodePool
	// Read, not np.StatusConditions(): that fills in missing conditions on the object.
	if !slices.ContainsFunc(np.Status.Conditions, func(c status.Condition) bool {
		return c.Type == status.ConditionReady && c.Status == metav1.ConditionTrue
	}) {
		return fmt.Sprintf("NodePool %s is not Ready", np.Name)
	}
	for name, limit := range np.Spec.Limits {
		used := np.Status.Resources[name]
		after := used.DeepCopy()
		after.Add(need[name])
		if after.Cmp(limit) > 0 {
			return fmt.Sprintf("NodePool %s is at its %s limit (%s used of %s)", np.Name, name, used.String(), limit.String())
		}
	}
	if !r.LastCapacityError.IsZero() && now.Sub(r.LastCapacityError) < s.CapacityWindow() {
		return fmt.Sprintf("a NodeClaim of %s failed for insufficient capacity at %s, within the last %s", np.Name, r.LastCapacityError.UTC().Format(time.RFC3339), s.CapacityWindow())
	}
	if r.Spot {
		switch {
		case r.SignalsProblem != "":
			return "spot signals are not fresh: " + r.SignalsProblem
		case r.Bucket == catalog.BucketUnknown:
			return fmt.Sprintf("the spot signals have no interruption figure for the types of %s", np.Name)
		case r.Bucket > s.MaxInterruption:
			return fmt.Sprintf("the spot interruption of %s's types is %s at best, above maxInterruption %s", np.Name, r.Bucket, s.MaxInterruption)
		}
	}
	return ""
}

// Target is the highest rung above from that can host every pod; ok is false when no
// rung above can.
func Target(rungs []Rung, from string, pods []*corev1.Pod) (Rung, bool) {
	weight := int32(-1)
	for _, r := range rungs {
		if r.Name == from {
			weight = r.Weight
		}
	}
	sorted := slices.Clone(rungs)
	// sort.SliceStable, not slices.SortFunc: a generic sort of Rung is its own 16 KB copy
	// of pdqsort in the binary (issue #23). Stable: rungs of one weight keep their order.
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Weight > sorted[j].Weight })
	for _, r := range sorted {
		if r.Weight > weight && r.Hosts(pods) {
			return r, true
		}
	}
	return Rung{}, false
}

// Moving are the pods a move evicts: not DaemonSet or mirror pods, not finished.
func Moving(pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Blocker says what keeps a node from moving gracefully: do-not-disrupt on the
// NodeClaim, the node or one of its pods, or a PodDisruptionBudget that allows no
// disruption of one of its pods. "" when nothing does.
func Blocker(nc *karpv1.NodeClaim, node *corev1.Node, pods []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget) string {
	if nc.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		return fmt.Sprintf("NodeClaim %s has %s", nc.Name, karpv1.DoNotDisruptAnnotationKey)
	}
	if node != nil && node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
		return fmt.Sprintf("node %s has %s", node.Name, karpv1.DoNotDisruptAnnotationKey)
	}
	var blocked []string
	for _, p := range pods {
		if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			return fmt.Sprintf("pod %s/%s has %s", p.Namespace, p.Name, karpv1.DoNotDisruptAnnotationKey)
		}
		for i := range pdbs {
			pdb := &pdbs[i]
			if pdb.Namespace != p.Namespace || pdb.Status.DisruptionsAllowed > 0 {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			blocked = append(blocked, fmt.Sprintf("PodDisruptionBudget %s/%s allows no disruption of pod %s", pdb.Namespace, pdb.Name, p.Name))
		}
	}
	if len(blocked) > 0 {
		slices.Sort(blocked)
		return strings.Join(slices.Compact(blocked), "; ")
	}
	return ""
}

// LowestBucket is the lowest known interruption bucket among the catalog's types that
// the requirements admit, in region.
func LowestBucket(cat *catalog.Catalog, region string, reqs []karpv1.NodeSelectorRequirementWithMinValues) catalog.Bucket {
	best := catalog.BucketUnknown
	m := catalog.NewMatcher(reqs)
	prices := cat.Prices[region]
	for name, t := range cat.Types {
		p, ok := prices[name]
		if !ok || p.Interruption == catalog.BucketUnknown || !m.Matches(t) {
			continue
		}
		if best == catalog.BucketUnknown || p.Interruption < best {
			best = p.Interruption
		}
	}
	return best
}

// CapacityErrorRung is the rung a NodeClaim named by Karpenter (<nodepool>-<suffix>)
// was launched from.
func CapacityErrorRung(nodeClaim string) string {
	if i := strings.LastIndex(nodeClaim, "-"); i > 0 {
		return nodeClaim[:i]
	}
	return ""
}
