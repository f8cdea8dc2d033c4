package simulate

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Offerings are what an account offers, which a region's catalog does not know: for each
// instance type, the zones it can launch in and, per zone, the capacity types. nil offers
// every catalog type in every zone of Options.Zones, on-demand and (where priced) spot.
type Offerings map[string]map[string][]string

// OfferingsFile is the format --offerings reads (YAML or JSON). Each entry offers one
// instance type in one zone at its capacity types (the file's capacityTypes when it names
// none); entries for the same type and zone add up, so the on-demand part from
// `aws ec2 describe-instance-type-offerings` and the spot part from
// `aws ec2 describe-spot-price-history` can be concatenated as they are.
type OfferingsFile struct {
	// CapacityTypes of the entries that name none; on-demand and spot when empty.
	CapacityTypes []string `json:"capacityTypes,omitempty"`
	// Offerings, one instance type in one zone each.
	Offerings []OfferingEntry `json:"offerings"`
}

// OfferingEntry is one instance type in one zone.
type OfferingEntry struct {
	InstanceType  string   `json:"instanceType"`
	Zone          string   `json:"zone"`
	CapacityTypes []string `json:"capacityTypes,omitempty"`
}

var zonePattern = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+)+$`)

// ParseOfferings decodes an offerings file strictly (an unknown field is an error) and
// checks each entry's form; every error names the entry. Whether the types exist is
// checked against the catalog by Check.
func ParseOfferings(data []byte) (Offerings, error) {
	var f OfferingsFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("decoding offerings: %w", err)
	}
	if len(f.Offerings) == 0 {
		return nil, fmt.Errorf("offerings: no entry: the file must list offerings (instanceType, zone, capacityTypes)")
	}
	defaults := f.CapacityTypes
	if len(defaults) == 0 {
		defaults = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}
	}
	if err := checkCapacityTypes("capacityTypes", defaults); err != nil {
		return nil, err
	}
	out := Offerings{}
	for i, e := range f.Offerings {
		where := fmt.Sprintf("offerings[%d]", i)
		if e.InstanceType == "" {
			return nil, fmt.Errorf("%s.instanceType: required", where)
		}
		if !zonePattern.MatchString(e.Zone) {
			return nil, fmt.Errorf("%s.zone: %q is not a zone name such as us-east-1a", where, e.Zone)
		}
		cts := e.CapacityTypes
		if len(cts) == 0 {
			cts = defaults
		}
		if err := checkCapacityTypes(where+".capacityTypes", cts); err != nil {
			return nil, err
		}
		if out[e.InstanceType] == nil {
			out[e.InstanceType] = map[string][]string{}
		}
		for _, ct := range cts {
			if !slices.Contains(out[e.InstanceType][e.Zone], ct) {
				out[e.InstanceType][e.Zone] = append(out[e.InstanceType][e.Zone], ct)
			}
		}
	}
	return out, nil
}

func checkCapacityTypes(where string, cts []string) error {
	for _, ct := range cts {
		if ct != karpv1.CapacityTypeOnDemand && ct != karpv1.CapacityTypeSpot {
			return fmt.Errorf("%s: %q is not a capacity type simulate offers (on-demand, spot)", where, ct)
		}
	}
	return nil
}

// OfferingsOf offers types in every zone of zones at on-demand and spot: what
// --instance-types alone says.
func OfferingsOf(types, zones []string) Offerings {
	out := Offerings{}
	for _, t := range types {
		out[t] = map[string][]string{}
		for _, z := range zones {
			out[t][z] = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}
		}
	}
	return out
}

// Types are the offered instance types, sorted.
func (o Offerings) Types() []string { return slices.Sorted(maps.Keys(o)) }

// Zones are the zones any type is offered in, sorted.
func (o Offerings) Zones() []string {
	zones := map[string]bool{}
	for _, byZone := range o {
		for z := range byZone {
			zones[z] = true
		}
	}
	return slices.Sorted(maps.Keys(zones))
}

// Only keeps the given types (every one must be offered) and, when zones is not empty,
// the given zones.
func (o Offerings) Only(types, zones []string) (Offerings, error) {
	out := Offerings{}
	keep := o.Types()
	if len(types) > 0 {
		keep = types
	}
	for _, t := range keep {
		byZone, ok := o[t]
		if !ok {
			return nil, fmt.Errorf("instance type %s is not in the offerings", t)
		}
		out[t] = map[string][]string{}
		for z, cts := range byZone {
			if len(zones) == 0 || slices.Contains(zones, z) {
				out[t][z] = cts
			}
		}
	}
	return out, nil
}

// Check refuses offerings the simulation cannot price: a type the catalog does not know
// or has no price for in region, and a zone outside region.
func (o Offerings) Check(cat *catalog.Catalog, region string) error {
	for _, t := range o.Types() {
		it, known := cat.Types[t]
		if _, priced := cat.Prices[region][t]; !known || !priced || it.PriceOnly {
			return fmt.Errorf("instance type %s: the catalog has no such type priced in %s (poolsmith catalog --region %s lists them)", t, region, region)
		}
		for z := range o[t] {
			if !strings.HasPrefix(z, region) {
				return fmt.Errorf("instance type %s: zone %s is not in region %s", t, z, region)
			}
		}
	}
	return nil
}
