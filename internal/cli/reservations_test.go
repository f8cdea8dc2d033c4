package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lint warns on the open-reservation trap with the reservations the AWS CLI printed, for
// the class with no reserved rung only, and refuses a file it cannot read as that output,
// naming the flag, the file, the entry and the field.
func TestLintWarnsOnOpenReservationsUnused(t *testing.T) {
	code, out, _ := run(t, "", "lint", "-f", "testdata/open-reservation.yaml", "--capacity-reservations", "testdata/capacity-reservations.json")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var trap []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "open-reservations-unused") {
			trap = append(trap, line)
		}
	}
	if len(trap) != 1 || !strings.Contains(trap[0], "WorkloadClass/web") ||
		!strings.Contains(trap[0], "open reservation cr-0a1b2c3d4e5f60718 (m7g.xlarge, us-east-1a, 3 available) stays billed and unused") {
		t.Fatalf("want one finding, for web, naming the reservation; got %q", trap)
	}
	// Without the file nothing says the reservation is open: no finding.
	if _, out, _ := run(t, "", "lint", "-f", "testdata/open-reservation.yaml"); strings.Contains(out, "open-reservations-unused") {
		t.Errorf("without --capacity-reservations:\n%s", out)
	}

	bad := filepath.Join(t.TempDir(), "cr.json")
	if err := os.WriteFile(bad, []byte(`{"CapacityReservations": [{"CapacityReservationId": "cr-1", "InstanceType": "m7g.large", "AvailabilityZone": "us-east-1a", "InstanceMatchCriteria": "open"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "", "lint", "-f", "testdata/open-reservation.yaml", "--capacity-reservations", bad)
	if code != ExitFindings || !strings.Contains(stderr, "--capacity-reservations "+bad+": CapacityReservations[0].AvailableInstanceCount is missing or negative (cr-1)") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
