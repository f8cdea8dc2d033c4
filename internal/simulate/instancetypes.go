package simulate

import (
	"fmt"
	"math"
	"slices"
	"sort"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

const (
	vmMemoryOverhead = 0.075
	ephemeralStorage = "20Gi"
)

// Unavailable marks an offering as unavailable (an insufficient-capacity error in EC2),
// for what-if simulations.
type Unavailable func(t *catalog.InstanceType, zone, capacityType string) bool

// known is what the simulation knows of a type beyond what Karpenter sees.
type known struct {
	facts *catalog.InstanceType
	price catalog.Price
}

// instanceTypes turns the catalog's types priced in region into Karpenter instance types
// offered in zones (only those offered, when offered is not nil), with the reserved
// offerings of the reservations, and what is known of each by name.
func instanceTypes(cat *catalog.Catalog, region string, zones []string, offered Offerings, unavailable Unavailable, reservations []Reservation) ([]*cloudprovider.InstanceType, map[string]known) {
	facts := map[string]known{}
	var out []*cloudprovider.InstanceType
	names := make([]string, 0, len(cat.Types))
	for n := range cat.Types {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t := cat.Types[name]
		p, priced := cat.Prices[region][name]
		reserved := reservedOfferings(name, p.OnDemand, reservations)
		if t.PriceOnly || !priced || offered != nil && offered[name] == nil && len(reserved) == 0 {
			continue
		}
		var offerings cloudprovider.Offerings
		capacityTypes, typeZones := map[string]bool{}, []string{}
		for _, zone := range zones {
			if offered != nil && len(offered[name][zone]) == 0 {
				continue
			}
			typeZones = append(typeZones, zone)
			for _, o := range []struct {
				ct    string
				price float64
			}{{karpv1.CapacityTypeOnDemand, p.OnDemand}, {karpv1.CapacityTypeSpot, p.SpotAvg}} {
				if o.price <= 0 || offered != nil && !slices.Contains(offered[name][zone], o.ct) {
					continue
				}
				available := unavailable == nil || !unavailable(t, zone, o.ct)
				offerings = append(offerings, &cloudprovider.Offering{
					Requirements: scheduling.NewRequirements(
						scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zone),
						scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, o.ct),
					),
					Price:     o.price,
					Available: available,
				})
				capacityTypes[o.ct] = true
			}
		}
		for _, o := range reserved {
			// A reservation's zone offers its type, whatever the offerings say.
			if zone := o.Requirements.Get(corev1.LabelTopologyZone).Any(); !slices.Contains(typeZones, zone) {
				typeZones = append(typeZones, zone)
			}
			offerings = append(offerings, o)
			capacityTypes[karpv1.CapacityTypeReserved] = true
		}
		if len(offerings) == 0 {
			continue
		}
		facts[name] = known{facts: t, price: p}
		out = append(out, &cloudprovider.InstanceType{
			Name:         name,
			Requirements: requirements(t, region, typeZones, capacityTypes, reserved),
			Offerings:    offerings,
			Capacity:     capacity(t),
			Overhead: &cloudprovider.InstanceTypeOverhead{
				KubeReserved: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(catalog.KubeReservedMilliCPU(t.VCPU)), resource.DecimalSI),
					corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", catalog.KubeReservedMemoryMiB(catalog.MaxPods))),
				},
				SystemReserved:    corev1.ResourceList{},
				EvictionThreshold: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", catalog.EvictionMemoryMiB))},
			},
		})
	}
	return out, facts
}

// requirements mirror the AWS provider's: every well-known label is defined, with the
// catalog's value or as absent; a type with reserved offerings has their reservation ids.
func requirements(t *catalog.InstanceType, region string, zones []string, capacityTypes map[string]bool, reserved cloudprovider.Offerings) scheduling.Requirements {
	var cts []string
	for ct := range capacityTypes {
		cts = append(cts, ct)
	}
	sort.Strings(cts)
	reqs := scheduling.NewRequirements(
		scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...),
		scheduling.NewRequirement(corev1.LabelTopologyRegion, corev1.NodeSelectorOpIn, region),
		scheduling.NewRequirement(corev1.LabelWindowsBuild, corev1.NodeSelectorOpDoesNotExist),
		scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, cts...),
	)
	labels := t.Labels()
	if len(reserved) > 0 {
		var ids []string
		for _, o := range reserved {
			ids = append(ids, o.ReservationID())
		}
		reqs.Add(scheduling.NewRequirement(cloudprovider.ReservationIDLabel, corev1.NodeSelectorOpIn, ids...),
			scheduling.NewRequirement(awsv1.LabelCapacityReservationType, corev1.NodeSelectorOpIn, string(awsv1.CapacityReservationTypeDefault)),
			scheduling.NewRequirement(awsv1.LabelCapacityReservationInterruptible, corev1.NodeSelectorOpIn, "false"))
	}
	for _, key := range []string{
		awsv1.LabelInstanceCPUManufacturer, awsv1.LabelInstanceCPUSustainedClockSpeedMhz, awsv1.LabelInstanceEBSBandwidth,
		awsv1.LabelInstanceNetworkBandwidth, awsv1.LabelInstanceCapabilityFlex, awsv1.LabelInstanceLocalNVME,
		awsv1.LabelInstanceGPUName, awsv1.LabelInstanceGPUManufacturer, awsv1.LabelInstanceGPUCount, awsv1.LabelInstanceGPUMemory,
		awsv1.LabelInstanceAcceleratorName, awsv1.LabelInstanceAcceleratorManufacturer, awsv1.LabelInstanceAcceleratorCount,
		awsv1.LabelInstanceHypervisor, awsv1.LabelInstanceEncryptionInTransitSupported, awsv1.LabelTopologyZoneID,
		cloudprovider.ReservationIDLabel, awsv1.LabelCapacityReservationType, awsv1.LabelCapacityReservationInterruptible,
	} {
		if _, known := labels[key]; !known && !reqs.Has(key) {
			reqs.Add(scheduling.NewRequirement(key, corev1.NodeSelectorOpDoesNotExist))
		}
	}
	reqs.Add(scheduling.NewRequirement(awsv1.LabelInstanceTenancy, corev1.NodeSelectorOpIn, "default", "dedicated"))
	for key, value := range labels {
		reqs.Add(scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, value))
	}
	return reqs
}

func capacity(t *catalog.InstanceType) corev1.ResourceList {
	mem := int64(math.Floor(float64(t.MemoryMiB) * (1 - vmMemoryOverhead)))
	c := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           resource.MustParse(fmt.Sprintf("%dMi", mem)),
		corev1.ResourcePods:             *resource.NewQuantity(catalog.MaxPods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse(ephemeralStorage),
	}
	switch t.GPUMaker {
	case "nvidia":
		c["nvidia.com/gpu"] = *resource.NewQuantity(int64(t.GPUs), resource.DecimalSI)
	case "amd":
		c["amd.com/gpu"] = *resource.NewQuantity(int64(t.GPUs), resource.DecimalSI)
	}
	return c
}
