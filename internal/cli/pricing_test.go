package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signalsFile writes a signals ConfigMap whose advisor feed gives m7g.large and
// m7g.xlarge 70% savings and c7g.large 61%, fetched 2026-11-29.
func signalsFile(t *testing.T) string {
	t.Helper()
	feed := `{"ranges":[{"index":0,"label":"<5%"},{"index":1,"label":"5-10%"}],` +
		`"spot_advisor":{"us-east-1":{"Linux":{"m7g.large":{"s":70,"r":0},"m7g.xlarge":{"s":70,"r":0},"c7g.large":{"s":61,"r":1}}}}}`
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: poolsmith-signals\n  namespace: poolsmith-system\n" +
		"  annotations: {poolsmith.dev/fetched-at: \"2026-11-29T10:00:00Z\"}\ndata:\n  spot-advisor-data.json: '" + feed + "'\n"
	path := filepath.Join(t.TempDir(), "signals.yaml")
	if err := os.WriteFile(path, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

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
	live := catalogRows(t, "--signals", signalsFile(t))
	m := live["m7g.large"]
	if want := plain["m7g.large"].Price.OnDemand * 0.3; math.Abs(m.Price.SpotAvg-want) > 1e-12 || m.Price.SpotSource != "advisor 2026-11-29" || m.Price.OnDemandSource != "catalog 2025-05-28" {
		t.Errorf("m7g.large with signals = %+v, want spot %v from advisor 2026-11-29", m.Price, want)
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
	code, out, stderr := run(t, "", "explain", "-f", samples, "--object", "NodePool/general-spot-arm64", "-o", "json", "--signals", signalsFile(t))
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
	for _, want := range []string{"median of the 60 cheapest", "their prices: catalog 2025-05-28 (57), advisor 2026-11-29 (3)", "/vCPU-h spot (catalog 2025-05-28)"} {
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
