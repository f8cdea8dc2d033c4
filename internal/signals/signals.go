// Package signals reads runtime cost signals: the Spot Instance Advisor's interruption
// buckets and savings over on-demand (its spot-advisor-data.json feed, as published) and
// optional per-type price overrides, from a ConfigMap the controller watches or a file the
// CLI is given. Signals overlay the embedded catalog for one region into the one priced
// catalog that weights, simulate, catalog and lint read; without them the catalog's own
// figures stand.
package signals

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// ConfigMap keys and annotation.
const (
	// AdvisorKey holds the Spot Instance Advisor feed, unchanged.
	AdvisorKey = "spot-advisor-data.json"
	// PricesKey optionally holds price overrides: {"m5.large": {"onDemand": 0.096, "spot": 0.035}}.
	PricesKey = "prices.json"
	// FetchedAtAnnotation is when the feed was fetched (RFC 3339); the refresh job sets it.
	FetchedAtAnnotation = "poolsmith.dev/fetched-at"
)

// MaxClockSkew is how far ahead of the reader's clock a fetched-at may be and still count
// as now: the refresh job's clock and the manager's may disagree by this much. A
// timestamp further ahead is not believed, and the signals are Stale until it is reached.
const MaxClockSkew = 5 * time.Minute

// MaxHourlyPrice is the highest price, USD per hour, a prices.json override may give. The
// dearest type in the catalog is u7in-32tb.224xlarge at $360.99/h on demand; $1000/h
// leaves it almost three times that headroom, and is a fixed figure so that a preview
// and the manager agree whatever catalog each was built with. Above it a price is a typo
// or a lie, and it would outrank every real type.
const MaxHourlyPrice = 1000.0

// PriceOverride replaces a type's catalog price in the signals' region; a zero figure is
// not overridden.
type PriceOverride struct {
	OnDemand float64 `json:"onDemand,omitempty"`
	Spot     float64 `json:"spot,omitempty"`
}

// Signals are the cost signals for one region.
type Signals struct {
	Region string
	// Buckets are the advisor's interruption buckets by type; BucketUnknown where the
	// advisor publishes {"s":0,"r":0}.
	Buckets map[string]catalog.Bucket
	// Savings are the advisor's savings of spot over on-demand by type, in percent (1..99);
	// types without a figure are absent.
	Savings map[string]int
	Prices  map[string]PriceOverride
	// FetchedAt is zero when unknown.
	FetchedAt time.Time
	// Source names where they came from, for messages.
	Source string
	// BareFeed is set for signals read from the advisor feed itself rather than a
	// ConfigMap: such a file carries no fetched-at, and signals publish dates it with the
	// moment it publishes it.
	BareFeed bool
}

type advisorFeed struct {
	Ranges []struct {
		Index int    `json:"index"`
		Label string `json:"label"`
	} `json:"ranges"`
	SpotAdvisor map[string]map[string]map[string]struct {
		S int `json:"s"`
		R int `json:"r"`
	} `json:"spot_advisor"`
}

// bucketByLabel maps the advisor's range labels to buckets. Its max values (5, 11, 16, 22,
// 100) do not match the labels' bounds, so they are never used.
var bucketByLabel = map[string]catalog.Bucket{
	"<5%": catalog.BucketUnder5, "5-10%": catalog.Bucket5To10, "10-15%": catalog.Bucket10To15,
	"15-20%": catalog.Bucket15To20, ">20%": catalog.BucketOver20,
}

// Advice is the advisor's entry for one type.
type Advice struct {
	Bucket catalog.Bucket
	// Savings is spot's saving over on-demand in percent; 0 when the advisor has no figure.
	Savings int
}

// ParseAdvisor reads the feed's Linux entries for region. ok is false when the feed has
// no Linux data for the region.
func ParseAdvisor(data []byte, region string) (map[string]Advice, bool, error) {
	var feed advisorFeed
	if err := json.Unmarshal(data, &feed); err != nil {
		return nil, false, fmt.Errorf("parsing the Spot Instance Advisor feed: %w", err)
	}
	byIndex := map[int]catalog.Bucket{}
	for _, r := range feed.Ranges {
		b, ok := bucketByLabel[r.Label]
		if !ok {
			return nil, false, fmt.Errorf("the Spot Instance Advisor feed has an unknown range label %q", r.Label)
		}
		byIndex[r.Index] = b
	}
	if len(byIndex) == 0 {
		return nil, false, fmt.Errorf("the Spot Instance Advisor feed has no ranges")
	}
	linux, ok := feed.SpotAdvisor[region]["Linux"]
	if !ok {
		return nil, false, nil
	}
	out := make(map[string]Advice, len(linux))
	for name, e := range linux {
		b, known := byIndex[e.R]
		switch {
		case e.S == 0 && e.R == 0:
			b = catalog.BucketUnknown // the advisor's "no data", not "<5%"
		case !known:
			return nil, false, fmt.Errorf("the Spot Instance Advisor feed gives %s range %d, which it does not define", name, e.R)
		case e.S < 0 || e.S >= 100:
			return nil, false, fmt.Errorf("the Spot Instance Advisor feed gives %s savings of %d%%, outside 0..99", name, e.S)
		}
		out[name] = Advice{Bucket: b, Savings: e.S}
	}
	return out, true, nil
}

// FilterFeed keeps the feed's ranges and one region's Linux entries: the whole feed is
// larger than a ConfigMap may be.
func FilterFeed(data []byte, region string) ([]byte, error) {
	var feed struct {
		Ranges      json.RawMessage                       `json:"ranges"`
		SpotAdvisor map[string]map[string]json.RawMessage `json:"spot_advisor"`
	}
	if err := json.Unmarshal(data, &feed); err != nil {
		return nil, fmt.Errorf("parsing the Spot Instance Advisor feed: %w", err)
	}
	linux, ok := feed.SpotAdvisor[region]["Linux"]
	if !ok {
		return nil, fmt.Errorf("the Spot Instance Advisor feed has no Linux data for %s", region)
	}
	out, err := json.Marshal(map[string]any{
		"ranges":       feed.Ranges,
		"spot_advisor": map[string]any{region: map[string]json.RawMessage{"Linux": linux}},
	})
	if err != nil {
		return nil, err
	}
	if _, _, err := ParseAdvisor(out, region); err != nil {
		return nil, err
	}
	return out, nil
}

// FromConfigMap reads signals for region. It returns nil, nil when the ConfigMap has no
// advisor data for the region.
func FromConfigMap(cm *corev1.ConfigMap, region string) (*Signals, error) {
	source := fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	feed, ok := cm.Data[AdvisorKey]
	if !ok {
		return nil, fmt.Errorf("%s has no %s key", source, AdvisorKey)
	}
	advice, found, err := ParseAdvisor([]byte(feed), region)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if !found {
		return nil, nil
	}
	s := fromAdvice(advice, region, source)
	if raw, ok := cm.Data[PricesKey]; ok {
		if s.Prices, err = parsePrices([]byte(raw)); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", source, PricesKey, err)
		}
	}
	if at, ok := cm.Annotations[FetchedAtAnnotation]; ok {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return nil, fmt.Errorf("%s: annotation %s: %w", source, FetchedAtAnnotation, err)
		}
		s.FetchedAt = t
	}
	return s, nil
}

// parsePrices reads price overrides and refuses any figure that is not a plausible hourly
// price: not positive (a figure given as 0 included: leave it out instead), not finite, or
// above MaxHourlyPrice. Each refusal names the type and the field.
func parsePrices(data []byte) (map[string]PriceOverride, error) {
	var raw map[string]struct {
		OnDemand *float64 `json:"onDemand"`
		Spot     *float64 `json:"spot"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	var bad []string
	out := make(map[string]PriceOverride, len(raw))
	for _, name := range names {
		o := raw[name]
		var p PriceOverride
		for _, f := range []struct {
			field string
			v     *float64
			to    *float64
		}{{"onDemand", o.OnDemand, &p.OnDemand}, {"spot", o.Spot, &p.Spot}} {
			if f.v == nil {
				continue
			}
			if problem := implausible(*f.v); problem != "" {
				bad = append(bad, fmt.Sprintf("%s %s %s %s", name, f.field, strconv.FormatFloat(*f.v, 'g', 6, 64), problem))
				continue
			}
			*f.to = *f.v
		}
		out[name] = p
	}
	if len(bad) > 0 {
		const shown = 3 // a condition message, not a listing of a hostile file
		more := ""
		if len(bad) > shown {
			more = fmt.Sprintf(" (and %d more)", len(bad)-shown)
			bad = bad[:shown]
		}
		return nil, fmt.Errorf("%s%s: a price must be above 0 and at most $%g per hour", strings.Join(bad, "; "), more, MaxHourlyPrice)
	}
	return out, nil
}

// implausible says what is wrong with an hourly price, or "" when nothing is.
func implausible(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "is not a number"
	case v < 0:
		return "is negative"
	case v == 0:
		return "is zero"
	case v > MaxHourlyPrice:
		return fmt.Sprintf("is above $%g per hour", MaxHourlyPrice)
	}
	return ""
}

// FromFile reads signals from a file holding either the signals ConfigMap (YAML or JSON)
// or the advisor feed itself.
func FromFile(data []byte, source, region string) (*Signals, error) {
	cm, err := configMapIn(data, source)
	if err != nil {
		return nil, err
	}
	if cm != nil {
		s, err := FromConfigMap(cm, region)
		if s != nil {
			s.Source = source
		}
		return s, err
	}
	advice, found, err := ParseAdvisor(data, region)
	if err != nil || !found {
		return nil, err
	}
	s := fromAdvice(advice, region, source)
	s.BareFeed = true
	return s, nil
}

// configMapIn is the signals ConfigMap a file holds (YAML or JSON), or nil when the file
// holds a bare document instead.
func configMapIn(data []byte, source string) (*corev1.ConfigMap, error) {
	var probe map[string]any
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if probe["kind"] != "ConfigMap" {
		return nil, nil
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(data, cm); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return cm, nil
}

func fromAdvice(advice map[string]Advice, region, source string) *Signals {
	s := &Signals{Region: region, Source: source, Buckets: make(map[string]catalog.Bucket, len(advice)), Savings: map[string]int{}}
	for name, a := range advice {
		s.Buckets[name] = a.Bucket
		if a.Savings > 0 {
			s.Savings[name] = a.Savings
		}
	}
	return s
}

// AdvisorSource names the advisor's prices: "advisor <fetched-at date>", or "advisor
// (undated)" for a feed without the annotation.
func (s *Signals) AdvisorSource() string {
	if s.FetchedAt.IsZero() {
		return catalog.SourceAdvisor + " (undated)"
	}
	return catalog.SourceAdvisor + " " + s.FetchedAt.UTC().Format(time.DateOnly)
}

// Apply overlays the signals on the catalog's prices for their region and returns the
// priced catalog; c is not changed. For each type: the advisor's interruption bucket;
// an on-demand override; then spot at on-demand x (1 - savings/100) where the advisor
// has a savings figure (both spot min and average: the advisor has one figure); then a
// spot override. Each price's source says which of these set it.
func (s *Signals) Apply(c *catalog.Catalog) *catalog.Catalog {
	out := &catalog.Catalog{Types: c.Types, Prices: map[string]map[string]catalog.Price{}, Dates: c.Dates}
	for r, prices := range c.Prices {
		out.Prices[r] = prices
	}
	region := make(map[string]catalog.Price, len(c.Prices[s.Region]))
	for name, p := range c.Prices[s.Region] {
		region[name] = p
	}
	for name, o := range s.Prices {
		if _, ok := region[name]; !ok && o.OnDemand > 0 { // a price needs an on-demand figure to be usable
			region[name] = catalog.Price{Interruption: catalog.BucketUnknown}
		}
	}
	advisor := s.AdvisorSource()
	for name, p := range region {
		if b, ok := s.Buckets[name]; ok {
			p.Interruption = b
		}
		o := s.Prices[name]
		if o.OnDemand > 0 {
			p.OnDemand, p.OnDemandSource = o.OnDemand, catalog.SourceOverride
		}
		if pct, ok := s.Savings[name]; ok && p.OnDemand > 0 {
			p.SpotAvg = p.OnDemand * (1 - float64(pct)/100)
			p.SpotMin, p.SpotSource = p.SpotAvg, advisor
		}
		if o.Spot > 0 {
			p.SpotMin, p.SpotAvg, p.SpotSource = o.Spot, o.Spot, catalog.SourceOverride
		}
		region[name] = p
	}
	out.Prices[s.Region] = region
	return out
}

// Freshness says whether signals can be trusted now.
type Freshness struct {
	Status  string // True or False, for the SignalsCurrent condition
	Reason  string // Fresh, Stale or Missing
	Message string
	// StaleAt is when Fresh signals turn Stale; zero otherwise.
	StaleAt time.Time
	// FreshAt is when signals dated a little ahead (within maxAge of now) come within
	// MaxClockSkew and turn Fresh; zero otherwise.
	FreshAt time.Time
}

// Assess judges signals at now against maxAge. s may be nil (no signals).
func Assess(s *Signals, missing string, now time.Time, maxAge time.Duration) Freshness {
	switch {
	case s == nil:
		return Freshness{Status: "False", Reason: "Missing", Message: missing + "; weights use the embedded catalog's interruption buckets"}
	case s.FetchedAt.IsZero():
		return Freshness{Status: "False", Reason: "Stale", Message: fmt.Sprintf("%s has no %s annotation, so its age is unknown; weights use the embedded catalog", s.Source, FetchedAtAnnotation)}
	case s.FetchedAt.Sub(now) > MaxClockSkew:
		f := Freshness{Status: "False", Reason: "Stale", Message: fmt.Sprintf("%s was fetched at %s, which is in the future (more than %s ahead of now); weights use the embedded catalog", s.Source, s.FetchedAt.UTC().Format(time.RFC3339), MaxClockSkew)}
		if s.FetchedAt.Sub(now) <= maxAge { // a clock ahead, not a date nobody could mean
			f.FreshAt = s.FetchedAt.Add(-MaxClockSkew)
		}
		return f
	case now.Sub(s.FetchedAt) > maxAge:
		return Freshness{Status: "False", Reason: "Stale", Message: fmt.Sprintf("%s was fetched at %s, more than %s ago; weights use the embedded catalog", s.Source, s.FetchedAt.UTC().Format(time.RFC3339), maxAge)}
	}
	return Freshness{Status: "True", Reason: "Fresh", StaleAt: s.FetchedAt.Add(maxAge),
		Message: fmt.Sprintf("%s fetched at %s: interruption buckets for %d types and spot prices from savings for %d in %s", s.Source, s.FetchedAt.UTC().Format(time.RFC3339), len(s.Buckets), len(s.Savings), s.Region)}
}
