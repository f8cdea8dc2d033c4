package simulate

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"

	"github.com/poolsmith/poolsmith/internal/render"
)

// launch makes the choice the AWS provider makes after scheduling: among the NodeClaim's
// instance types and the zones and capacity types its requirements allow, reserved
// capacity is used when the scheduler reserved some (it then pins the NodeClaim to
// reserved and the reservations' ids), else spot when any spot offering is available, else
// on-demand. Reserved and on-demand take the lowest price; a reserved NodeClaim is priced
// at on-demand, what the reservation bills whether used or not.
// Spot uses EC2 Fleet's price-capacity-optimized strategy, which weighs price against the
// depth of each capacity pool; the catalog knows no pool depths, so the approximation
// takes the lowest price multiplied by the Spot Instance Advisor's interruption penalty
// (the same table as RiskAdjustedCost), interruption frequency standing in for shallow
// pools. It cannot model a pool that is deep today and cheap tomorrow.
func launch(nc *scheduling.NodeClaim, facts map[string]known) NodeClaim {
	out := NodeClaim{NodePool: nc.NodePoolName, Options: len(nc.InstanceTypeOptions)}
	for _, p := range nc.Pods {
		out.Pods = append(out.Pods, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out.Pods)
	capacityType := karpv1.CapacityTypeOnDemand
	allowed := nc.Requirements.Get(karpv1.CapacityTypeLabelKey)
	if allowed.Len() == 1 && allowed.Has(karpv1.CapacityTypeReserved) {
		capacityType = karpv1.CapacityTypeReserved
	} else if allowed.Has(karpv1.CapacityTypeSpot) {
		for _, it := range nc.InstanceTypeOptions {
			for _, o := range it.Offerings {
				if o.Available && o.Requirements.Get(karpv1.CapacityTypeLabelKey).Any() == karpv1.CapacityTypeSpot && nc.Requirements.Get(corev1.LabelTopologyZone).Has(o.Requirements.Get(corev1.LabelTopologyZone).Any()) {
					capacityType = karpv1.CapacityTypeSpot
				}
			}
		}
	}
	best := math.Inf(1)
	for _, it := range nc.InstanceTypeOptions {
		for _, o := range it.Offerings {
			zone := o.Requirements.Get(corev1.LabelTopologyZone).Any()
			if !o.Available || o.Requirements.Get(karpv1.CapacityTypeLabelKey).Any() != capacityType || !nc.Requirements.Get(corev1.LabelTopologyZone).Has(zone) {
				continue
			}
			if capacityType == karpv1.CapacityTypeReserved && !nc.Requirements.Get(cloudprovider.ReservationIDLabel).Has(o.ReservationID()) {
				continue
			}
			score := o.Price
			if capacityType == karpv1.CapacityTypeSpot {
				score *= render.RiskPenalty[facts[it.Name].price.Interruption]
			}
			if score < best || (score == best && (it.Name < out.InstanceType || (it.Name == out.InstanceType && zone < out.Zone))) {
				best = score
				out.InstanceType, out.Zone, out.PricePerHour, out.CapacityType = it.Name, zone, o.Price, capacityType
				if f := facts[it.Name].facts; f != nil {
					out.Family = f.Family
				}
				out.PriceSource, out.ReservationID = facts[it.Name].price.OnDemandSource, ""
				switch capacityType {
				case karpv1.CapacityTypeSpot:
					out.PriceSource = facts[it.Name].price.SpotSource
				case karpv1.CapacityTypeReserved:
					out.PricePerHour, out.ReservationID = facts[it.Name].price.OnDemand, o.ReservationID()
				}
			}
		}
	}
	return out
}
