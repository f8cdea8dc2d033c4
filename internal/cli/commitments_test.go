package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explain names the commitment in the weight of the rung it ranked, and lists the class's
// commitments in their own section.
func TestExplainNamesTheCommitment(t *testing.T) {
	code, out, stderr := run(t, "", "explain", "-f", "testdata/commitments.yaml")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range [][]string{
		{"NodePool/api-on-demand-arm64-m7g-xlarge", "spec.weight", "100", "computed:weight(RiskAdjustedCost: $0.0000/vCPU-h on-demand marginal: Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1) has room for class api"},
		{"NodePool/api-on-demand-arm64-m7g-xlarge", "spec.disruption.consolidationPolicy", "WhenEmpty", "computed:commitment sp-0a1b2c3d"},
		{"WorkloadClass/api", "commitments[sp-0a1b2c3d]", "share $1.2000/h: Open", "computed:commitments (offline: no nodes known, every plan has room)"},
	} {
		if !hasLine(out, want...) {
			t.Errorf("explain output has no line with %q", want)
		}
	}
	if !strings.Contains(out, "\nCOMMITMENTS (") {
		t.Errorf("no commitments section:\n%s", out)
	}
}

// What admission refuses the CLI refuses with the field named, and an expired plan too,
// which admission can refuse only when the Baseline is created.
func TestCommitmentsBadInputIsRefusedNamingTheField(t *testing.T) {
	ok, err := os.ReadFile("testdata/commitments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, want string }{
		{`commitment: "3.00"`, `commitment: "-1"`, `spec.commitments.savingsPlans[0].commitment: Invalid value: "-1": commitment: US dollars per hour, more than 0`},
		{`discount: "31%"`, `discount: "120%"`, `spec.commitments.savingsPlans[0].discount.families[0].discount: Invalid value: "120%": discount: a percentage from 0% to 99.99%`},
		{"family: m7g\n", "family: m9z\n", `spec.commitments.savingsPlans[0].family: Invalid value: "m9z": family: m9z is not an instance family Poolsmith's catalog knows`},
		{"      share: {percent: 40}", "      end: \"2026-01-01T00:00:00Z\"\n      share: {percent: 40}", "spec.commitments.savingsPlans[0].end: 2026-01-01T00:00:00Z is past"},
	} {
		path := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(path, []byte(strings.Replace(string(ok), c.old, c.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := run(t, "", "render", "-f", path)
		if code == ExitOK || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %s; want %s", c.new, code, stderr, c.want)
		}
	}
}
