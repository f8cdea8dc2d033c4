package cli

import (
	"strings"
	"testing"
)

// --dry-run prints the signals ConfigMap with commitments.json and nothing else; bad
// input is refused naming the file, the entry and the field; a missing input is a usage
// error.
func TestSignalsCommitmentsDryRun(t *testing.T) {
	code, out, stderr := run(t, "", "signals", "commitments", "--savings-plans", "../signals/testdata/commitments/sp.json",
		"--rates", "../signals/testdata/commitments/rates-sp-0a1b2c3d.json", "--reserved-instances", "../signals/testdata/commitments/ri.json", "--dry-run")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"kind: ConfigMap", "name: poolsmith-signals", "namespace: poolsmith-system", "commitments.json: |", `"id": "sp-0a1b2c3d"`,
		`"m7g.xlarge": "0.112608"`, `"effectiveHourly": "0.064247"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "spot-advisor-data.json") || strings.Contains(out, "fetched-at") {
		t.Errorf("the ConfigMap holds only commitments.json, or this command would own the feed's fields:\n%s", out)
	}

	code, _, stderr = run(t, "", "signals", "commitments", "--reserved-instances", "testdata/capacity-reservations.json", "--dry-run")
	if code != ExitFindings || !strings.Contains(stderr, "testdata/capacity-reservations.json: not the JSON of aws ec2 describe-reserved-instances") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"--dry-run"}, {"--rates", "x.json", "--reserved-instances", "../signals/testdata/commitments/ri.json", "--dry-run"}} {
		if code, _, stderr := run(t, "", append([]string{"signals", "commitments"}, args...)...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
}
