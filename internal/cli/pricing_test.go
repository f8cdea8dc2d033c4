package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolsmith/poolsmith/internal/operator"
)

// signalsFile writes a signals ConfigMap whose advisor feed gives m7g.large and
// m7g.xlarge 70% savings and c7g.large 61%, fetched at fetchedAt, with prices as its
// prices.json when given.
func signalsFile(t *testing.T, fetchedAt time.Time, prices string) string {
	t.Helper()
	feed := `{"ranges":[{"index":0,"label":"<5%"},{"index":1,"label":"5-10%"}],` +
		`"spot_advisor":{"us-east-1":{"Linux":{"m7g.large":{"s":70,"r":0},"m7g.xlarge":{"s":70,"r":0},"c7g.large":{"s":61,"r":1}}}}}`
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: poolsmith-signals\n  namespace: poolsmith-system\n" +
		"  annotations: {poolsmith.dev/fetched-at: \"" + fetchedAt.UTC().Format(time.RFC3339) + "\"}\ndata:\n  spot-advisor-data.json: '" + feed + "'\n"
	if prices != "" {
		cm += "  prices.json: '" + prices + "'\n"
	}
	path := filepath.Join(t.TempDir(), "signals.yaml")
	if err := os.WriteFile(path, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// recent is a fetched-at the manager's default --signals-max-age finds Fresh, and advisor
// the price source it gives.
var (
	recent  = time.Now().UTC().Add(-time.Hour)
	advisor = "advisor " + recent.Format(time.DateOnly)
)

type priceRow struct {
	Name, Family, Outlier string
	Price                 struct {
		OnDemand, SpotAvg          float64
		OnDemandSource, SpotSource string
	}
}

func catalogRows(t *testing.T, args ...string) map[string]priceRow {
	t.Helper()
	code, out, stderr := run(t, "", append([]string{"catalog", "-o", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("catalog %v: exit %d: %s", args, code, stderr)
	}
	var rows []priceRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	byName := map[string]priceRow{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	return byName
}

// TestCatalogPricesSpotFromTheAdvisor: with --signals, catalog's spot price is on-demand
// x (1 - s/100) and names the advisor; without, the snapshot's, naming the catalog.
func TestCatalogPricesSpotFromTheAdvisor(t *testing.T) {
	plain := catalogRows(t)
	live := catalogRows(t, "--signals", signalsFile(t, recent, ""))
	m := live["m7g.large"]
	if want := plain["m7g.large"].Price.OnDemand * 0.3; math.Abs(m.Price.SpotAvg-want) > 1e-12 || m.Price.SpotSource != advisor || m.Price.OnDemandSource != "catalog 2025-05-28" {
		t.Errorf("m7g.large with signals = %+v, want spot %v from %s", m.Price, want, advisor)
	}
	if p := plain["m7g.large"].Price; p.SpotSource != "catalog 2025-05-28" || p.SpotAvg == m.Price.SpotAvg {
		t.Errorf("m7g.large without signals = %+v", p)
	}
	if live["m7i.large"].Price != plain["m7i.large"].Price {
		t.Error("a type the feed lacks must keep the catalog's prices")
	}
	if plain["c8gd.large"].Outlier != "high" || plain["m7g.large"].Outlier != "" {
		t.Errorf("outlier marks: c8gd.large %q, m7g.large %q", plain["c8gd.large"].Outlier, plain["m7g.large"].Outlier)
	}
}

// TestExplainNamesEveryPriceSource: each cost-ranked rung's weight origin names the
// median type's price source and every source of the prices it was taken over.
func TestExplainNamesEveryPriceSource(t *testing.T) {
	code, out, stderr := run(t, "", "explain", "-f", samples, "--object", "NodePool/general-spot-arm64", "-o", "json", "--signals", signalsFile(t, recent, ""))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var fields []struct{ Path, Origin string }
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatal(err)
	}
	var origin string
	for _, f := range fields {
		if f.Path == "spec.weight" {
			origin = f.Origin
		}
	}
	for _, want := range []string{"median of the 60 cheapest", "their prices: catalog 2025-05-28 (57), " + advisor + " (3)", "/vCPU-h spot (catalog 2025-05-28)"} {
		if !strings.Contains(origin, want) {
			t.Errorf("spec.weight origin %q lacks %q", origin, want)
		}
	}
}

// TestOutliersAreListed: catalog --outliers names the odd families and, with -f, the
// classes whose spot rungs allow them; lint notes them.
func TestOutliersAreListed(t *testing.T) {
	code, out, stderr := run(t, "", "catalog", "--outliers", "-f", samples)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, parts := range [][]string{{"c8gd", "c", "12", "89%", "66%"}, {"r8gd", "r", "89%"}, {"r5b", "37%"}, {"general", "c8gd,m8gd,r8gd", "general-spot-arm64", "no weight"}} {
		if !hasLine(out, parts...) {
			t.Errorf("catalog --outliers has no line with %v:\n%s", parts, out)
		}
	}
	code, out, _ = run(t, "", "lint", "-f", samples)
	if code != ExitOK || !hasLine(out, "info", "WorkloadClass/general", "spot-outlier", "c8gd (12 types): spot discount 89%") {
		t.Errorf("lint: exit %d\n%s", code, out)
	}
}

// TestSignalsAreJudgedAsTheManagerJudgesThem: every command that takes --signals takes
// the manager's --signals-max-age with the manager's default, and signals the manager
// would not use (too old for it, dated in the future) price nothing: the preview shows
// the weights the cluster gets, and stderr says why.
func TestSignalsAreJudgedAsTheManagerJudgesThem(t *testing.T) {
	root := newRootCommand(nil, nil, nil)
	for _, name := range []string{"render", "explain", "lint", "simulate", "catalog", "diff"} {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		f := c.Flags().Lookup("signals-max-age")
		if f == nil || f.DefValue != operator.DefaultSignalsMaxAge.String() {
			t.Errorf("%s: --signals-max-age %+v, want the manager's default %s", name, f, operator.DefaultSignalsMaxAge)
		}
	}

	plain := catalogRows(t)["m7g.xlarge"].Price
	threeDaysOld := signalsFile(t, time.Now().Add(-72*time.Hour), "")
	for _, tc := range []struct {
		name   string
		args   []string
		source string // m7g.xlarge's spot price source
		warn   string
	}{
		{"fresh", []string{"--signals", signalsFile(t, recent, "")}, advisor, ""},
		{"older than the default 48h", []string{"--signals", threeDaysOld}, plain.SpotSource, "warning: --signals: Stale: " + threeDaysOld + " was fetched at"},
		{"within a longer --signals-max-age", []string{"--signals", threeDaysOld, "--signals-max-age", "96h"}, "advisor " + time.Now().UTC().Add(-72*time.Hour).Format(time.DateOnly), ""},
		{"dated in the future", []string{"--signals", signalsFile(t, time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), "")}, plain.SpotSource, "2999-01-01T00:00:00Z, which is in the future"},
		// A bare feed has no fetched-at: signals publish dates it when it publishes it.
		{"a bare feed", []string{"--signals", "../signals/testdata/spot-advisor-data.json"}, "advisor (undated)", ""},
	} {
		code, out, stderr := run(t, "", append([]string{"catalog", "-o", "json"}, tc.args...)...)
		var rows []priceRow
		if code != ExitOK || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("%s: exit %d: %s", tc.name, code, stderr)
		}
		for _, r := range rows {
			if r.Name == "m7g.xlarge" && r.Price.SpotSource != tc.source {
				t.Errorf("%s: m7g.xlarge spot from %q, want %q", tc.name, r.Price.SpotSource, tc.source)
			}
		}
		if (tc.warn == "") != (stderr == "") || !strings.Contains(stderr, tc.warn) {
			t.Errorf("%s: stderr %q, want %q", tc.name, stderr, tc.warn)
		}
	}

	// explain with signals the manager would not use prints what it prints without them:
	// the manager's weights and their reasons.
	_, want, _ := run(t, "", "explain", "-f", samples, "-o", "json")
	for _, file := range []string{threeDaysOld, signalsFile(t, time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), "")} {
		if code, got, stderr := run(t, "", "explain", "-f", samples, "-o", "json", "--signals", file); code != ExitOK || got != want || !strings.Contains(stderr, "Stale") {
			t.Errorf("explain --signals %s: exit %d, same output as without signals: %v; stderr %q", file, code, got == want, stderr)
		}
	}
	if _, got, _ := run(t, "", "explain", "-f", samples, "-o", "json", "--signals", signalsFile(t, recent, "")); got == want {
		t.Error("fresh signals changed nothing explain prints: the comparison above proves nothing")
	}

	if code, _, stderr := run(t, "", "render", "-f", samples, "--signals", threeDaysOld, "--signals-max-age", "0s"); code != ExitUsage || !strings.Contains(stderr, "--signals-max-age 0s must be positive") {
		t.Errorf("--signals-max-age 0s: exit %d: %s", code, stderr)
	}
}

// TestImplausiblePriceOverridesAreRefused: a prices.json override that is negative, zero
// or absurd is invalid input naming the type, as it is invalid signals in the cluster.
func TestImplausiblePriceOverridesAreRefused(t *testing.T) {
	for prices, want := range map[string]string{
		`{"m7g.large": {"onDemand": -0.1}}`:  "m7g.large onDemand -0.1 is negative",
		`{"m7g.large": {"spot": 1.7e308}}`:   "m7g.large spot 1.7e+308 is above $1000 per hour",
		`{"m7g.large": {"onDemand": 0.08}}`:  "",
		`{"m7g.large": {"spot": 0, "x": 1}}`: "m7g.large spot 0 is zero",
	} {
		code, out, stderr := run(t, "", "render", "-f", samples, "--signals", signalsFile(t, recent, prices))
		if want == "" {
			if code != ExitOK {
				t.Errorf("%s: exit %d: %s", prices, code, stderr)
			}
			continue
		}
		if code != ExitFindings || out != "" || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stdout %d bytes, stderr %q; want exit 1 naming %q", prices, code, len(out), stderr, want)
		}
	}
}
