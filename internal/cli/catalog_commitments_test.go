package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// catalog --commitments prices the worked example's covered type as docs/commitments.md
// computes it (m7g.xlarge at 0.1632 x 0.69 = $0.112608/h, $0.028152/vCPU-h, 31 % off),
// on the on-demand rung only; the uncovered type and the spot rungs get none.
func TestCatalogCommitmentsPricesTheWorkedExample(t *testing.T) {
	code, out, stderr := run(t, "", "catalog", "-f", "testdata/commitments.yaml", "--class", "api", "--commitments", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		Rung       string `json:"rung"`
		Name       string `json:"name"`
		Commitment *struct {
			ID         string  `json:"id"`
			Rate       float64 `json:"rate"`
			RateSource string  `json:"rateSource"`
			Discount   float64 `json:"discount"`
			PerVCPU    float64 `json:"effectivePerVCPU"`
		} `json:"commitment"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	covered := 0
	for _, r := range rows {
		if r.Commitment == nil {
			continue
		}
		covered++
		c := r.Commitment
		if r.Rung != "api-on-demand-arm64-m7g-xlarge" || r.Name != "m7g.xlarge" || c.ID != "sp-0a1b2c3d" || c.RateSource != "baseline:discount.families" ||
			!near(c.Rate, 0.112608) || !near(c.PerVCPU, 0.028152) || !near(c.Discount, 0.31) {
			t.Errorf("row %+v commitment %+v", r, *c)
		}
	}
	if covered != 1 || len(rows) != 4 {
		t.Errorf("%d rows, %d covered; want 4 and 1:\n%s", len(rows), covered, out)
	}
	if _, out, _ := run(t, "", "catalog", "-f", "testdata/commitments.yaml", "--class", "api"); strings.Contains(out, "COMMITMENT") {
		t.Errorf("without --commitments the table has no commitment columns:\n%s", out)
	}
	if code, _, stderr := run(t, "", "catalog", "--commitments"); code != ExitUsage || !strings.Contains(stderr, "--commitments needs -f and --class") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
