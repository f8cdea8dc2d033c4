package commitment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Kind is what a commitment is; it is also AWS's order of application: Reserved
// Instances first, then EC2 Instance Savings Plans, then Compute Savings Plans.
type Kind int

// Kinds, in AWS's order.
const (
	ReservedInstance Kind = iota
	EC2InstanceSavingsPlan
	ComputeSavingsPlan
)

func (k Kind) String() string {
	switch k {
	case ReservedInstance:
		return "Reserved Instance"
	case EC2InstanceSavingsPlan:
		return "EC2Instance Savings Plan"
	}
	return "Compute Savings Plan"
}

// Commitment is one resolved Savings Plan or Reserved Instance. A Savings Plan's share
// and usage are US dollars per hour; a Reserved Instance's are normalized units (AWS's
// normalization factors: large 4, xlarge 8).
type Commitment struct {
	ID    string
	Kind  Kind
	Field string // where it was declared, e.g. spec.commitments.savingsPlans[0]
	// Share is this cluster's part: $/h (Savings Plan) or normalized units (Reserved
	// Instance).
	Share float64
	// Savings Plan
	Family, Region  string             // EC2Instance only
	DefaultDiscount *float64           // a fraction, 0.31
	Discounts       map[string]float64 // by family, fractions
	// Reserved Instance
	InstanceType    string
	Zone            string // a zonal RI: only its type in its zone
	EffectiveHourly float64
	// EffectiveHourlyOrigin is where EffectiveHourly came from: baseline:effectiveHourly,
	// or the export's origin.
	EffectiveHourlyOrigin string
	End                   *time.Time
	// Rates are a Savings Plan's exported effective hourly rates by instance type, valid in
	// RatesRegion, from RatesOrigin (signals:commitments <exportedAt>).
	Rates                    map[string]float64
	RatesRegion, RatesOrigin string
	// Facts are the facts the entry was resolved from, each with its origin (the Baseline
	// or the export), for explain.
	Facts []Fact
}

// Fact is one resolved fact of a commitment and the layer that gave it.
type Fact struct {
	Name, Value, Origin string
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

// Dollars parses a money string of the API ("12.50"): positive, at most 4 digits before
// the point.
func Dollars(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || v > 5000 || strings.ContainsAny(s, "eE+-") {
		return 0, fmt.Errorf("%q is not US dollars per hour above 0 and at most 5000", s)
	}
	return v, nil
}

// Percent parses a discount of the API ("31%", "27.5%") into a fraction below 1.
func Percent(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || v < 0 || v >= 100 || strings.ContainsAny(num, "eE+-") {
		return 0, fmt.Errorf("%q is not a percentage from 0%% to 99.99%%", s)
	}
	return v / 100, nil
}

// NormalizationFactor is AWS's size weight for size-flexible Reserved Instances: nano
// 0.25, micro 0.5, small 1, medium 2, large 4, xlarge 8, Nxlarge 8N; metal and unknown
// sizes 0 (a metal size's factor depends on the family, so it is never size-flexible here).
func NormalizationFactor(instanceType string) float64 {
	_, size, _ := strings.Cut(instanceType, ".")
	switch size {
	case "nano":
		return 0.25
	case "micro":
		return 0.5
	case "small":
		return 1
	case "medium":
		return 2
	case "large":
		return 4
	case "xlarge":
		return 8
	}
	if n, ok := strings.CutSuffix(size, "xlarge"); ok {
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			return 8 * float64(v)
		}
	}
	return 0
}

// family is the instance family of a type name (m7g of m7g.xlarge).
func family(instanceType string) string {
	f, _, _ := strings.Cut(instanceType, ".")
	return f
}

// Covers says whether c applies to one instance of the type, launched on-demand in region
// (and zone, when known): spot is never covered.
func (c Commitment) Covers(t *catalog.InstanceType, region, zone string) bool {
	switch c.Kind {
	case ComputeSavingsPlan:
		return true
	case EC2InstanceSavingsPlan:
		return t.Family == c.Family && (c.Region == "" || c.Region == region)
	}
	if c.Zone != "" {
		return t.Name == c.InstanceType && (zone == "" || zone == c.Zone)
	}
	return t.Family == family(c.InstanceType) && NormalizationFactor(t.Name) > 0
}

// Covering is the first of cs (in AWS's order, as given) that covers one on-demand
// instance of the type in region, with its rate and where the rate came from.
func Covering(cs []Commitment, t *catalog.InstanceType, onDemand float64, region string) (Commitment, float64, string, bool) {
	for _, c := range cs {
		if rate, source, ok := c.Rate(t, onDemand, region, ""); ok {
			return c, rate, source, true
		}
	}
	return Commitment{}, 0, "", false
}

// Rate is the effective hourly of one instance of the type under c (what it draws from
// the commitment), with where the figure came from; ok is false when c does not cover the
// type or gives no figure for it. A Savings Plan's rate is on-demand x (1 - discount), the
// family's discount before the exported rate, before the default; a Reserved Instance's is its effectiveHourly
// scaled by the normalization factors, else the type's on-demand x (1 - 0.40), a
// typical one-year discount. A Savings Plan's exported rate for the type stands between
// the family's discount and the default.
func (c Commitment) Rate(t *catalog.InstanceType, onDemand float64, region, zone string) (usd float64, source string, ok bool) {
	if !c.Covers(t, region, zone) || onDemand <= 0 {
		return 0, "", false
	}
	if c.Kind == ReservedInstance {
		nf := NormalizationFactor(t.Name) / NormalizationFactor(c.InstanceType)
		if c.EffectiveHourly > 0 {
			return c.EffectiveHourly * nf, c.EffectiveHourlyOrigin, true
		}
		return onDemand * (1 - DefaultRIDiscount), "computed:on-demand x 0.60", true
	}
	// A family the Baseline names beats AWS's rate, which beats a blanket discount
	// (docs/design/commitments.md §3).
	if d, ok := c.Discounts[t.Family]; ok {
		return onDemand * (1 - d), "baseline:discount.families", true
	}
	if r, ok := c.Rates[t.Name]; ok && (c.RatesRegion == "" || c.RatesRegion == region) {
		return r, c.RatesOrigin, true
	}
	if c.DefaultDiscount != nil {
		return onDemand * (1 - *c.DefaultDiscount), "baseline:discount.default", true
	}
	return 0, "", false
}

// DefaultRIDiscount prices a Reserved Instance declared without effectiveHourly.
const DefaultRIDiscount = 0.40

// Use is how much of c's share one instance of the type takes: its rate ($/h) for a
// Savings Plan, its normalized units for a Reserved Instance.
func (c Commitment) Use(t *catalog.InstanceType, rate float64) float64 {
	if c.Kind == ReservedInstance {
		return NormalizationFactor(t.Name)
	}
	return rate
}

// Describe names c for explain and status: "Savings Plan sp-0a1b2c3d (EC2Instance m7g
// us-east-1)".
func (c Commitment) Describe() string {
	switch c.Kind {
	case ComputeSavingsPlan:
		return "Savings Plan " + c.ID + " (Compute)"
	case EC2InstanceSavingsPlan:
		return strings.TrimSpace("Savings Plan " + c.ID + " (EC2Instance " + c.Family + " " + c.Region + ")")
	}
	return "Reserved Instance " + c.ID + " (" + c.InstanceType + ")"
}
