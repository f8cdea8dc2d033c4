// Package signals reads runtime cost signals: the Spot Instance Advisor's interruption
// buckets (its spot-advisor-data.json feed, as published) and optional per-type price
// overrides, from a ConfigMap the controller watches or a file the CLI is given. Signals
// overlay the embedded catalog for one region; without them the catalog's own figures
// stand.
package signals

import (
	"encoding/json"
	"fmt"
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

// PriceOverride replaces a type's catalog price in the signals' region.
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
	Prices  map[string]PriceOverride
	// FetchedAt is zero when unknown.
	FetchedAt time.Time
	// Source names where they came from, for messages.
	Source string
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

// ParseAdvisor reads the feed's Linux buckets for region. ok is false when the feed has no
// Linux data for the region.
func ParseAdvisor(data []byte, region string) (map[string]catalog.Bucket, bool, error) {
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
	out := make(map[string]catalog.Bucket, len(linux))
	for name, e := range linux {
		b, known := byIndex[e.R]
		switch {
		case e.S == 0 && e.R == 0:
			b = catalog.BucketUnknown // the advisor's "no data", not "<5%"
		case !known:
			return nil, false, fmt.Errorf("the Spot Instance Advisor feed gives %s range %d, which it does not define", name, e.R)
		}
		out[name] = b
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
	buckets, found, err := ParseAdvisor([]byte(feed), region)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if !found {
		return nil, nil
	}
	s := &Signals{Region: region, Buckets: buckets, Source: source}
	if raw, ok := cm.Data[PricesKey]; ok {
		if err := json.Unmarshal([]byte(raw), &s.Prices); err != nil {
			return nil, fmt.Errorf("%s: parsing %s: %w", source, PricesKey, err)
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

// FromFile reads signals from a file holding either the signals ConfigMap (YAML or JSON)
// or the advisor feed itself.
func FromFile(data []byte, source, region string) (*Signals, error) {
	var probe map[string]any
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if probe["kind"] == "ConfigMap" {
		cm := &corev1.ConfigMap{}
		if err := yaml.UnmarshalStrict(data, cm); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		s, err := FromConfigMap(cm, region)
		if s != nil {
			s.Source = source
		}
		return s, err
	}
	buckets, found, err := ParseAdvisor(data, region)
	if err != nil || !found {
		return nil, err
	}
	return &Signals{Region: region, Buckets: buckets, Source: source}, nil
}

// Apply overlays the signals on the catalog's prices for their region and returns the
// result; c is not changed.
func (s *Signals) Apply(c *catalog.Catalog) *catalog.Catalog {
	out := &catalog.Catalog{Types: c.Types, Prices: map[string]map[string]catalog.Price{}}
	for r, prices := range c.Prices {
		out.Prices[r] = prices
	}
	region := map[string]catalog.Price{}
	for name, p := range c.Prices[s.Region] {
		if b, ok := s.Buckets[name]; ok {
			p.Interruption = b
		}
		region[name] = p
	}
	for name, o := range s.Prices {
		p, ok := region[name]
		if !ok {
			p = catalog.Price{Interruption: catalog.BucketUnknown}
			if b, known := s.Buckets[name]; known {
				p.Interruption = b
			}
		}
		if o.OnDemand > 0 {
			p.OnDemand = o.OnDemand
		}
		if o.Spot > 0 {
			p.SpotMin, p.SpotAvg = o.Spot, o.Spot
		}
		if p.OnDemand > 0 { // a price needs an on-demand figure to be usable
			region[name] = p
		}
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
}

// Assess judges signals at now against maxAge. s may be nil (no signals).
func Assess(s *Signals, missing string, now time.Time, maxAge time.Duration) Freshness {
	switch {
	case s == nil:
		return Freshness{Status: "False", Reason: "Missing", Message: missing + "; weights use the embedded catalog's interruption buckets"}
	case s.FetchedAt.IsZero():
		return Freshness{Status: "False", Reason: "Stale", Message: fmt.Sprintf("%s has no %s annotation, so its age is unknown; weights use the embedded catalog", s.Source, FetchedAtAnnotation)}
	case now.Sub(s.FetchedAt) > maxAge:
		return Freshness{Status: "False", Reason: "Stale", Message: fmt.Sprintf("%s was fetched at %s, more than %s ago; weights use the embedded catalog", s.Source, s.FetchedAt.UTC().Format(time.RFC3339), maxAge)}
	}
	return Freshness{Status: "True", Reason: "Fresh", StaleAt: s.FetchedAt.Add(maxAge),
		Message: fmt.Sprintf("%s fetched at %s: interruption buckets for %d types in %s", s.Source, s.FetchedAt.UTC().Format(time.RFC3339), len(s.Buckets), s.Region)}
}
