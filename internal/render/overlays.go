package render

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// NodeOverlayAPIVersion is the API version of rendered NodeOverlays.
const NodeOverlayAPIVersion = "karpenter.sh/v1alpha1"

// OverlayWeight is the weight of Poolsmith's overlays. They never overlap each other (one
// class, one bucket, disjoint types), so it only orders them against overlays of others.
const OverlayWeight int32 = 10

var bucketSlug = map[catalog.Bucket]string{
	catalog.Bucket5To10: "5-10", catalog.Bucket10To15: "10-15", catalog.Bucket15To20: "15-20",
	catalog.BucketOver20: "over-20", catalog.BucketUnknown: "unknown",
}

// overlays renders one NodeOverlay per interruption bucket that carries a risk penalty,
// raising by that penalty the spot price of the class's types in the bucket.
func (r *renderer) overlays(t *template, rungs []Rung) ([]*karpv1alpha1.NodeOverlay, []origins) {
	if w := r.class.Spec.Weighting; w == nil || !w.NodeOverlays {
		return nil, nil
	}
	byBucket := map[catalog.Bucket]map[string]bool{}
	for _, rung := range rungs {
		if rung.CapacityType != v1alpha1.CapacityTypeSpot {
			continue
		}
		matcher := catalog.NewMatcher(plain(rungRequirements(t, rung)))
		for _, ty := range r.catalog.Types {
			p, ok := r.catalog.Prices[r.region][ty.Name]
			if !ok || p.SpotAvg == 0 || RiskPenalty[p.Interruption] == 1 || !matcher.Matches(ty) {
				continue
			}
			if byBucket[p.Interruption] == nil {
				byBucket[p.Interruption] = map[string]bool{}
			}
			byBucket[p.Interruption][ty.Name] = true
		}
	}
	var buckets []catalog.Bucket
	for b := range byBucket {
		buckets = append(buckets, b)
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
	var out []*karpv1alpha1.NodeOverlay
	var outOrigins []origins
	for _, b := range buckets {
		types := make([]string, 0, len(byBucket[b]))
		for name := range byBucket[b] {
			types = append(types, name)
		}
		sort.Strings(types)
		adjustment := fmt.Sprintf("+%d%%", int(math.Round((RiskPenalty[b]-1)*100)))
		out = append(out, &karpv1alpha1.NodeOverlay{
			TypeMeta:   metav1.TypeMeta{APIVersion: NodeOverlayAPIVersion, Kind: "NodeOverlay"},
			ObjectMeta: metav1.ObjectMeta{Name: ShortenName(r.class.Name + "-risk-" + bucketSlug[b]), Labels: r.ownerLabels()},
			Spec: karpv1alpha1.NodeOverlaySpec{
				Requirements: []karpv1alpha1.NodeSelectorRequirement{
					{Key: v1alpha1.LabelClass, Operator: corev1.NodeSelectorOpIn, Values: []string{r.class.Name}},
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{string(v1alpha1.CapacityTypeSpot)}},
					{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types},
				},
				PriceAdjustment: ptr.To(adjustment),
				Weight:          ptr.To(OverlayWeight),
			},
		})
		o := origins{}
		o.set("", OriginComputed(fmt.Sprintf("risk overlay: spot interruption %s raises the price by %s (RiskAdjustedCost penalty x%.2f) in %s", b, adjustment, RiskPenalty[b], r.region)))
		o.set("metadata", OriginComputed("class"))
		outOrigins = append(outOrigins, o)
	}
	return out, outOrigins
}
