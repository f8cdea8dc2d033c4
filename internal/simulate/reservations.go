package simulate

import (
	"fmt"
	"slices"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Reservation is an active On-Demand Capacity Reservation the classes' EC2NodeClasses
// select: Karpenter offers it to NodePools that allow karpenter.sh/capacity-type: reserved
// as a reserved offering of its type in its zone, with its available count.
type Reservation struct {
	ID, InstanceType, Zone string
	// Available is how many instances it still has room for.
	Available int
}

// reservedPriceDivisor is how the AWS provider prices a reserved offering: on-demand
// divided by it, "free" but still ordered for consolidation
// (offering/reserved_capacity_resolver.go).
const reservedPriceDivisor = 10_000_000.0

// checkReservations refuses a reservation of a type the catalog does not price in region,
// or in a zone not offered.
func checkReservations(rs []Reservation, cat *catalog.Catalog, region string, zones []string) error {
	for i, r := range rs {
		switch {
		case cat.Types[r.InstanceType] == nil || cat.Prices[region][r.InstanceType].OnDemand <= 0:
			return fmt.Errorf("reservation %d (%s): instance type %s: the catalog has no such type priced on-demand in %s", i, r.ID, r.InstanceType, region)
		case !slices.Contains(zones, r.Zone):
			return fmt.Errorf("reservation %d (%s): zone %s is not offered (%v)", i, r.ID, r.Zone, zones)
		case r.Available < 0:
			return fmt.Errorf("reservation %d (%s): %d available is negative", i, r.ID, r.Available)
		}
	}
	return nil
}

// reservedOfferings are the reserved offerings of one instance type, as the AWS provider
// builds them: full ones stay Available with no capacity.
func reservedOfferings(name string, onDemand float64, rs []Reservation) cloudprovider.Offerings {
	var out cloudprovider.Offerings
	for _, r := range rs {
		if r.InstanceType != name {
			continue
		}
		out = append(out, &cloudprovider.Offering{
			Requirements: scheduling.NewRequirements(
				scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeReserved),
				scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, r.Zone),
				scheduling.NewRequirement(cloudprovider.ReservationIDLabel, corev1.NodeSelectorOpIn, r.ID),
				scheduling.NewRequirement(awsv1.LabelCapacityReservationType, corev1.NodeSelectorOpIn, string(awsv1.CapacityReservationTypeDefault)),
				scheduling.NewRequirement(awsv1.LabelCapacityReservationInterruptible, corev1.NodeSelectorOpIn, "false"),
			),
			Price:               onDemand / reservedPriceDivisor,
			Available:           true,
			ReservationCapacity: r.Available,
		})
	}
	return out
}
