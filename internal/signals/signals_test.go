package signals_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/signals"
)

func feed(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/spot-advisor-data.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseAdvisorKeysOnRangesNotMax(t *testing.T) {
	got, found, err := signals.ParseAdvisor(feed(t), "us-east-1")
	if err != nil || !found {
		t.Fatalf("found %v, err %v", found, err)
	}
	want := map[string]catalog.Bucket{
		"m5.large":   catalog.Bucket15To20, // r 3, whose max is 22
		"c7g.large":  catalog.BucketUnder5,
		"m7g.xlarge": catalog.BucketOver20,
		"x2gd.metal": catalog.BucketUnknown, // {"s":0,"r":0}: no data, not <5%
		"r6i.large":  catalog.Bucket5To10,   // r 1, whose max is 11
		"c6a.large":  catalog.Bucket10To15,  // r 2, whose max is 16
	}
	if len(got) != len(want) {
		t.Fatalf("got %d types, want %d (Linux only)", len(got), len(want))
	}
	for name, b := range want {
		if got[name].Bucket != b {
			t.Errorf("%s = %s, want %s", name, got[name].Bucket, b)
		}
	}
	if got["m7g.xlarge"].Savings != 70 || got["x2gd.metal"].Savings != 0 {
		t.Errorf("savings: m7g.xlarge %d, x2gd.metal %d; want 70 and 0", got["m7g.xlarge"].Savings, got["x2gd.metal"].Savings)
	}
	if _, found, _ := signals.ParseAdvisor(feed(t), "ap-south-9"); found {
		t.Error("a region the feed lacks must not be found")
	}
	if _, _, err := signals.ParseAdvisor([]byte(`{"ranges":[{"index":0,"label":"<1%"}]}`), "us-east-1"); err == nil {
		t.Error("an unknown range label must be an error")
	}
}

func configMap(t *testing.T, fetchedAt string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-signals", Namespace: "poolsmith-system"},
		Data:       map[string]string{signals.AdvisorKey: string(feed(t)), signals.PricesKey: `{"m5.large": {"onDemand": 0.2, "spot": 0.05}, "zz1.large": {"onDemand": 1}}`},
	}
	if fetchedAt != "" {
		cm.Annotations = map[string]string{signals.FetchedAtAnnotation: fetchedAt}
	}
	return cm
}

func TestConfigMapSignalsOverlayTheCatalog(t *testing.T) {
	s, err := signals.FromConfigMap(configMap(t, "2026-11-29T10:00:00Z"), "us-east-1")
	if err != nil || s == nil {
		t.Fatalf("%v %v", s, err)
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	over := s.Apply(cat)
	if p := over.Prices["us-east-1"]["m5.large"]; p.OnDemand != 0.2 || p.SpotAvg != 0.05 || p.Interruption != catalog.Bucket15To20 {
		t.Errorf("m5.large = %+v", p)
	}
	if p := over.Prices["us-east-1"]["m7g.xlarge"]; p.Interruption != catalog.BucketOver20 || p.OnDemand != cat.Prices["us-east-1"]["m7g.xlarge"].OnDemand {
		t.Errorf("m7g.xlarge = %+v", p)
	}
	if p := over.Prices["us-east-1"]["zz1.large"]; p.OnDemand != 1 {
		t.Errorf("zz1.large = %+v", p)
	}
	if cat.Prices["us-east-1"]["m5.large"].OnDemand == 0.2 || over.Prices["eu-west-1"]["m5.large"] != cat.Prices["eu-west-1"]["m5.large"] {
		t.Error("Apply changed the catalog or another region")
	}
}

// TestAdvisorSavingsPriceSpot: where the advisor has a savings figure, spot is on-demand
// x (1 - s/100) and says so; an explicit override still wins; without a figure the
// snapshot's spot price stands.
func TestAdvisorSavingsPriceSpot(t *testing.T) {
	s, err := signals.FromConfigMap(configMap(t, "2026-11-29T10:00:00Z"), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	over := s.Apply(cat)
	base := cat.Prices["us-east-1"]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	for name, pct := range map[string]float64{"m7g.xlarge": 70, "r6i.large": 68, "c6a.large": 62, "c7g.large": 61} {
		p := over.Prices["us-east-1"][name]
		want := base[name].OnDemand * (1 - pct/100)
		if !near(p.SpotAvg, want) || !near(p.SpotMin, want) || p.SpotSource != "advisor 2026-11-29" || p.OnDemandSource != "catalog 2025-05-28" {
			t.Errorf("%s = %+v, want spot %v from advisor 2026-11-29", name, p, want)
		}
	}
	if p := over.Prices["us-east-1"]["m5.large"]; p.SpotAvg != 0.05 || p.SpotSource != "override" || p.OnDemandSource != "override" {
		t.Errorf("the override must win over the advisor: m5.large = %+v", p)
	}
	if p := over.Prices["us-east-1"]["x2gd.metal"]; p.SpotAvg != base["x2gd.metal"].SpotAvg || p.SpotSource != "catalog 2025-05-28" {
		t.Errorf("no savings figure ({s:0}) must keep the catalog's spot: x2gd.metal = %+v", p)
	}
	if p := over.Prices["us-east-1"]["m7i.large"]; p != base["m7i.large"] {
		t.Errorf("a type the feed lacks changed: %+v", p)
	}
	undated, _ := signals.FromFile(feed(t), "feed.json", "us-east-1")
	if p := undated.Apply(cat).Prices["us-east-1"]["m7g.xlarge"]; p.SpotSource != "advisor (undated)" {
		t.Errorf("an undated feed's source = %q", p.SpotSource)
	}
}

func TestFreshness(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	fresh, _ := signals.FromConfigMap(configMap(t, "2026-11-29T10:00:00Z"), "us-east-1")
	if f := signals.Assess(fresh, "", now, 48*time.Hour); f.Reason != "Fresh" || !f.StaleAt.Equal(now.Add(46*time.Hour)) {
		t.Errorf("fresh = %+v", f)
	}
	old, _ := signals.FromConfigMap(configMap(t, "2026-11-20T10:00:00Z"), "us-east-1")
	if f := signals.Assess(old, "", now, 48*time.Hour); f.Reason != "Stale" || !strings.Contains(f.Message, "2026-11-20T10:00:00Z") {
		t.Errorf("old = %+v", f)
	}
	undated, _ := signals.FromConfigMap(configMap(t, ""), "us-east-1")
	if f := signals.Assess(undated, "", now, 48*time.Hour); f.Reason != "Stale" {
		t.Errorf("undated = %+v", f)
	}
	if f := signals.Assess(nil, "ConfigMap x/y not found", now, time.Hour); f.Reason != "Missing" || !strings.HasPrefix(f.Message, "ConfigMap x/y not found") {
		t.Errorf("missing = %+v", f)
	}
	none, err := signals.FromConfigMap(configMap(t, ""), "ap-south-9")
	if none != nil || err != nil {
		t.Errorf("a region the feed lacks: %v %v", none, err)
	}
}

func TestFromFileAcceptsTheFeedOrTheConfigMap(t *testing.T) {
	s, err := signals.FromFile(feed(t), "feed.json", "eu-west-1")
	if err != nil || s.Buckets["m5.large"] != catalog.BucketUnder5 {
		t.Fatalf("%+v %v", s, err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  namespace: n\n  annotations: {poolsmith.dev/fetched-at: \"2026-11-29T10:00:00Z\"}\ndata:\n  spot-advisor-data.json: |\n    " +
		strings.ReplaceAll(string(feed(t)), "\n", "\n    ") + "\n"
	s, err = signals.FromFile([]byte(cm), "cm.yaml", "us-east-1")
	if err != nil || s.Buckets["c7g.large"] != catalog.BucketUnder5 || s.FetchedAt.IsZero() || s.Source != "cm.yaml" {
		t.Fatalf("%+v %v", s, err)
	}
}

// TestAFutureFetchedAtIsStale: a fetched-at beyond the clock-skew allowance is not
// believed; within it, it is now. A date a little ahead comes due by itself; one nobody
// could mean (2999) never does.
func TestAFutureFetchedAtIsStale(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, at string
		reason   string
		freshAt  time.Time
	}{
		{"within the skew", "2026-11-29T12:04:00Z", "Fresh", time.Time{}},
		{"a clock an hour ahead", "2026-11-29T13:00:00Z", "Stale", time.Date(2026, 11, 29, 12, 55, 0, 0, time.UTC)},
		{"the year 2999", "2999-01-01T00:00:00Z", "Stale", time.Time{}},
	} {
		s, err := signals.FromConfigMap(configMap(t, tc.at), "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		f := signals.Assess(s, "", now, 48*time.Hour)
		if f.Reason != tc.reason || !f.FreshAt.Equal(tc.freshAt) {
			t.Errorf("%s: %+v, want %s fresh at %v", tc.name, f, tc.reason, tc.freshAt)
		}
		if tc.reason == "Stale" && (f.Status != "False" || !strings.Contains(f.Message, tc.at+", which is in the future") || !f.StaleAt.IsZero()) {
			t.Errorf("%s: %+v", tc.name, f)
		}
	}
}

// TestPriceOverridesMustBePlausible: an override that is not a positive hourly price of at
// most MaxHourlyPrice is refused, naming the type and the field, instead of being ignored
// (negative, zero) or outranking every real type (1.7e308).
func TestPriceOverridesMustBePlausible(t *testing.T) {
	for _, tc := range []struct{ prices, want string }{
		{`{"m5.large": {"onDemand": -0.1}}`, "m5.large onDemand -0.1 is negative"},
		{`{"m5.large": {"onDemand": 0.1, "spot": -0.05}}`, "m5.large spot -0.05 is negative"},
		{`{"m5.large": {"spot": 0}}`, "m5.large spot 0 is zero"},
		{`{"m5.large": {"onDemand": 1.7e308}}`, "m5.large onDemand 1.7e+308 is above $1000 per hour"},
		{`{"m5.large": {"onDemand": 1000.01}}`, "m5.large onDemand 1000.01 is above $1000 per hour"},
		{`{"m5.large": {"onDemand": 1e999}}`, "parsing"},
		{`{"a.large": {"spot": -1}, "b.large": {"spot": -1}, "c.large": {"spot": -1}, "d.large": {"spot": -1}}`, "c.large spot -1 is negative (and 1 more)"},
	} {
		cm := configMap(t, "2026-11-29T10:00:00Z")
		cm.Data[signals.PricesKey] = tc.prices
		s, err := signals.FromConfigMap(cm, "us-east-1")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "prices.json") {
			t.Errorf("%s: signals %v, error %v; want an error with %q", tc.prices, s, err, tc.want)
		}
	}
	cm := configMap(t, "2026-11-29T10:00:00Z")
	cm.Data[signals.PricesKey] = fmt.Sprintf(`{"u7in-32tb.224xlarge": {"onDemand": %g}}`, signals.MaxHourlyPrice)
	if s, err := signals.FromConfigMap(cm, "us-east-1"); err != nil || s.Prices["u7in-32tb.224xlarge"].OnDemand != signals.MaxHourlyPrice {
		t.Errorf("the ceiling itself: %v %v", s, err)
	}
}

// TestTheCeilingIsGenerous: every catalog price is well under MaxHourlyPrice, so a real
// override for the dearest type is never refused; a regenerated catalog that breaks this
// margin fails here rather than in a cluster.
func TestTheCeilingIsGenerous(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	for region, prices := range cat.Prices {
		for name, p := range prices {
			if p.OnDemand*2 > signals.MaxHourlyPrice {
				t.Errorf("%s in %s costs $%g/h on demand: the ceiling leaves less than twice that", name, region, p.OnDemand)
			}
		}
	}
}
