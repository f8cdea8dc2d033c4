package catalog

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// DefaultRegion is the region whose prices rank types when none is given.
const DefaultRegion = "us-east-1"

// Arch is the architecture of a family or type: every type of a family shares one. ok is
// false when the catalog does not know it.
func (c *Catalog) Arch(familyOrType string) (arch string, ok bool) {
	if t, found := c.Types[familyOrType]; found && !t.PriceOnly {
		return t.Arch, true
	}
	for _, t := range c.Types {
		if t.Family == familyOrType && !t.PriceOnly {
			return t.Arch, true
		}
	}
	return "", false
}

// Unit is what a profile buys: the denominator of a type's unit price.
type Unit string

const (
	UnitVCPU   Unit = "vCPU"
	UnitMemory Unit = "GiB"
	UnitGPU    Unit = "GPU"
)

// Of is how many units a type offers.
func (u Unit) Of(t *InstanceType) float64 {
	switch u {
	case UnitMemory:
		return float64(t.MemoryMiB) / 1024
	case UnitGPU:
		return float64(t.GPUs)
	default:
		return float64(t.VCPU)
	}
}

// Choice asks for the cheapest families or instance types.
type Choice struct {
	// Requirements every chosen type must satisfy (the rung's shape and architecture).
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	Region       string
	// Spot ranks by the average spot price (types without spot are skipped); otherwise by
	// on-demand.
	Spot bool
	Unit Unit
	// N is how many to choose.
	N int
}

// Cheapest returns up to N families (byFamily) or types, cheapest unit price first, ties
// by name. A family's unit price is that of its cheapest matching type.
func (c *Catalog) Cheapest(ch Choice, byFamily bool) []string {
	best := map[string]float64{}
	matcher := NewMatcher(ch.Requirements)
	for _, t := range c.Types {
		p, ok := c.Prices[ch.Region][t.Name]
		if !ok || !matcher.Matches(t) || ch.Unit.Of(t) == 0 {
			continue
		}
		hourly := p.OnDemand
		if ch.Spot {
			if p.SpotAvg == 0 {
				continue
			}
			hourly = p.SpotAvg
		}
		key := t.Name
		if byFamily {
			key = t.Family
		}
		unit := hourly / ch.Unit.Of(t)
		if prev, seen := best[key]; !seen || unit < prev {
			best[key] = unit
		}
	}
	keys := make([]string, 0, len(best))
	for k := range best {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := round(best[keys[i]]), round(best[keys[j]]); a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	if len(keys) > ch.N {
		keys = keys[:ch.N]
	}
	return keys
}

// round keeps rankings stable against floating-point noise.
func round(v float64) float64 { return math.Round(v*1e9) / 1e9 }

// familyScheme parses a family name as the AWS provider parses type names: category, an
// optional "-<n>tb" part, the generation, then attributes.
var familyScheme = regexp.MustCompile(`^([a-z]+)(-[0-9]+tb)?([0-9]+)([a-z0-9-]*)$`)

// FamilyFacts are what a family's name says.
type FamilyFacts struct {
	Category   string
	Generation int
	// Arch is arm64 for Graviton names (a "g" among the attributes, as in m7g, c6gn,
	// x2gd, or a1), amd64 otherwise.
	Arch string
}

// ParseFamily reads a family name the way Karpenter's labels derive category and
// generation; ok is false for names outside that scheme.
func ParseFamily(family string) (FamilyFacts, bool) {
	m := familyScheme.FindStringSubmatch(family)
	if m == nil {
		return FamilyFacts{}, false
	}
	gen, _ := strconv.Atoi(m[3])
	arch := "amd64"
	if strings.Contains(m[4], "g") || family == "a1" {
		arch = "arm64"
	}
	return FamilyFacts{Category: m[1], Generation: gen, Arch: arch}, true
}
