package lint_test

import (
	"strings"
	"testing"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/render"
)

// describeCapacityReservations is what `aws ec2 describe-capacity-reservations` prints
// for: an open m7g.xlarge reservation with room in us-east-1a, the same full, a targeted
// one, an expired one and an open c7i.xlarge one.
const describeCapacityReservations = `{"CapacityReservations": [
 {"CapacityReservationId": "cr-open", "OwnerId": "123456789012", "InstanceType": "m7g.xlarge", "InstancePlatform": "Linux/UNIX",
  "AvailabilityZone": "us-east-1a", "Tenancy": "default", "TotalInstanceCount": 4, "AvailableInstanceCount": 3,
  "EbsOptimized": true, "EphemeralStorage": false, "State": "active", "StartDate": "2026-11-01T00:00:00.000Z",
  "EndDateType": "unlimited", "InstanceMatchCriteria": "open", "CreateDate": "2026-11-01T00:00:00.000Z", "Tags": [],
  "CapacityAllocations": [], "ReservationType": "default"},
 {"CapacityReservationId": "cr-full", "InstanceType": "m7g.xlarge", "AvailabilityZone": "us-east-1a",
  "TotalInstanceCount": 2, "AvailableInstanceCount": 0, "State": "active", "InstanceMatchCriteria": "open"},
 {"CapacityReservationId": "cr-targeted", "InstanceType": "m7g.xlarge", "AvailabilityZone": "us-east-1a",
  "TotalInstanceCount": 2, "AvailableInstanceCount": 2, "State": "active", "InstanceMatchCriteria": "targeted"},
 {"CapacityReservationId": "cr-ended", "InstanceType": "m7g.xlarge", "AvailabilityZone": "us-east-1a",
  "TotalInstanceCount": 2, "AvailableInstanceCount": 2, "State": "active", "InstanceMatchCriteria": "open",
  "EndDate": "2026-11-30T00:00:00.000Z"},
 {"CapacityReservationId": "cr-amd", "InstanceType": "c7i.xlarge", "AvailabilityZone": "us-east-1b",
  "TotalInstanceCount": 1, "AvailableInstanceCount": 1, "State": "active", "InstanceMatchCriteria": "open"}]}`

var lintNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func reservationFindings(t *testing.T, classes ...lint.Class) []lint.Finding {
	t.Helper()
	known, err := lint.ParseReservations("cr.json", []byte(describeCapacityReservations))
	if err != nil {
		t.Fatal(err)
	}
	return lint.OpenReservations(classes, known, render.Options{}, lintNow)
}

// The trap: an on-demand rung that could launch m7g.xlarge in us-east-1a leaves the open
// reservation with room unused, and lint says so, naming it; the full, targeted and ended
// ones, and a type the class cannot launch, are no finding. A class with a reserved rung
// and a spot-only class are quiet.
func TestOpenReservationsUnusedByOnDemandRungs(t *testing.T) {
	arm := v1alpha1.WorkloadClassSpec{
		Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64},
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
		Instances:     &v1alpha1.InstanceShape{Families: []string{"m7g"}},
	}
	web := rendered(t, class("web", arm))
	findings := reservationFindings(t, web)
	if len(findings) != 1 || !has(findings, lint.Warning, "WorkloadClass/web", lint.CheckOpenReservationsUnused) {
		t.Fatalf("findings = %v, want one open-reservations-unused warning", findings)
	}
	for _, want := range []string{"cr-open (m7g.xlarge, us-east-1a, 3 available)", "web-on-demand-arm64", "CapacityReservationPreference: none", "add reserved to spec.capacityTypes", "#8176"} {
		if !strings.Contains(findings[0].Message, want) {
			t.Errorf("message %q lacks %q", findings[0].Message, want)
		}
	}

	spotOnly := arm
	spotOnly.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot}
	withReserved := arm
	withReserved.CapacityTypes = []v1alpha1.CapacityType{v1alpha1.CapacityTypeReserved, v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand}
	r := rendered(t, class("reserving", withReserved))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	amd := rendered(t, class("amd", v1alpha1.WorkloadClassSpec{
		Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64},
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand},
		Instances:     &v1alpha1.InstanceShape{Families: []string{"c7i"}},
		Zones:         []string{"us-east-1a"},
	}))
	if findings := reservationFindings(t, rendered(t, class("spot", spotOnly)), r, amd); len(findings) != 0 {
		t.Errorf("spot-only, reserved-rung and other-zone classes: %v", findings)
	}
}

// Offline, a Baseline term that selects open reservations is enough to warn: their
// instances are unknown, so the finding names the term.
func TestOpenReservationsSelectedByTheBaseline(t *testing.T) {
	c := rendered(t, class("web", v1alpha1.WorkloadClassSpec{CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand}}))
	c.Baseline.Spec.NodeClass.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-1"}, {InstanceMatchCriteria: "open"}}
	findings := lint.OpenReservations([]lint.Class{c}, nil, render.Options{}, lintNow)
	if len(findings) != 1 || !strings.Contains(findings[0].Message, "capacityReservationSelectorTerms[1]") {
		t.Fatalf("findings = %v, want one naming term 1", findings)
	}
	c.Baseline.Spec.NodeClass.CapacityReservationSelectorTerms = c.Baseline.Spec.NodeClass.CapacityReservationSelectorTerms[:1]
	if findings := lint.OpenReservations([]lint.Class{c}, nil, render.Options{}, lintNow); len(findings) != 0 {
		t.Errorf("an id term says nothing of open matching: %v", findings)
	}
}

func TestParseReservationsNamesTheFileEntryAndField(t *testing.T) {
	for in, want := range map[string]string{
		`[]`:                   "cr.json: not the JSON of aws ec2 describe-capacity-reservations",
		`{"Reservations": []}`: "cr.json: no CapacityReservations list",
		`{"CapacityReservations": [{"InstanceType": "m7g.large"}]}`: "cr.json: CapacityReservations[0].CapacityReservationId is missing",
		`{"CapacityReservations": [{"CapacityReservationId": "cr-1", "InstanceType": "m7g.large", "AvailabilityZone": "us-east-1a", "InstanceMatchCriteria": "open"}]}`:                                                       "cr.json: CapacityReservations[0].AvailableInstanceCount is missing or negative (cr-1)",
		`{"CapacityReservations": [{"CapacityReservationId": "cr-1", "InstanceType": "m7g.large", "AvailabilityZone": "us-east-1a", "InstanceMatchCriteria": "any", "AvailableInstanceCount": 1}]}`:                           `cr.json: CapacityReservations[0].InstanceMatchCriteria "any" is neither open nor targeted (cr-1)`,
		`{"CapacityReservations": [{"CapacityReservationId": "cr-1", "InstanceType": "m7g.large", "AvailabilityZone": "us-east-1a", "InstanceMatchCriteria": "open", "AvailableInstanceCount": 3, "TotalInstanceCount": 2}]}`: "cr.json: CapacityReservations[0].TotalInstanceCount 2 is below AvailableInstanceCount 3 (cr-1)",
	} {
		_, err := lint.ParseReservations("cr.json", []byte(in))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}
