package lint

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/render"
)

// CheckOpenReservationsUnused: a class with on-demand rungs and no reserved rung, where an
// open capacity reservation it could use is known (docs/commitments.md, "The trap").
const CheckOpenReservationsUnused = "open-reservations-unused"

// trapReason is why such a reservation stays unused, with the upstream issues.
const trapReason = "launch with CapacityReservationPreference: none (Karpenter v1.15.0's ReservedCapacity gate, on by default), so"

const trapFix = "add reserved to spec.capacityTypes (aws/karpenter-provider-aws#8176, #9518)"

// Reservation is a capacity reservation as `aws ec2 describe-capacity-reservations`
// prints it: the fields the open-reservations-unused check reads.
type Reservation struct {
	ID                     string     `json:"CapacityReservationId"`
	InstanceType           string     `json:"InstanceType"`
	AvailabilityZone       string     `json:"AvailabilityZone"`
	InstanceMatchCriteria  string     `json:"InstanceMatchCriteria"`
	State                  string     `json:"State"`
	AvailableInstanceCount *int32     `json:"AvailableInstanceCount"`
	TotalInstanceCount     *int32     `json:"TotalInstanceCount"`
	EndDate                *time.Time `json:"EndDate,omitempty"`
}

// ParseReservations reads what `aws ec2 describe-capacity-reservations --output json`
// prints. name is the file's name for errors, which also name the entry and field.
func ParseReservations(name string, data []byte) ([]Reservation, error) {
	var doc struct {
		CapacityReservations *[]Reservation `json:"CapacityReservations"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: not the JSON of aws ec2 describe-capacity-reservations: %w", name, err)
	}
	if doc.CapacityReservations == nil {
		return nil, fmt.Errorf("%s: no CapacityReservations list: not the JSON of aws ec2 describe-capacity-reservations", name)
	}
	for i, r := range *doc.CapacityReservations {
		at := fmt.Sprintf("%s: CapacityReservations[%d]", name, i)
		switch {
		case r.ID == "":
			return nil, fmt.Errorf("%s.CapacityReservationId is missing", at)
		case r.InstanceType == "":
			return nil, fmt.Errorf("%s.InstanceType is missing (%s)", at, r.ID)
		case r.AvailabilityZone == "":
			return nil, fmt.Errorf("%s.AvailabilityZone is missing (%s)", at, r.ID)
		case r.InstanceMatchCriteria != "open" && r.InstanceMatchCriteria != "targeted":
			return nil, fmt.Errorf("%s.InstanceMatchCriteria %q is neither open nor targeted (%s)", at, r.InstanceMatchCriteria, r.ID)
		case r.AvailableInstanceCount == nil || *r.AvailableInstanceCount < 0:
			return nil, fmt.Errorf("%s.AvailableInstanceCount is missing or negative (%s)", at, r.ID)
		case r.TotalInstanceCount != nil && *r.TotalInstanceCount < *r.AvailableInstanceCount:
			return nil, fmt.Errorf("%s.TotalInstanceCount %d is below AvailableInstanceCount %d (%s)", at, *r.TotalInstanceCount, *r.AvailableInstanceCount, r.ID)
		}
	}
	return *doc.CapacityReservations, nil
}

// OpenReservations warns, for every class that has on-demand rungs and no reserved rung,
// about the open capacity reservations it leaves unused: under Karpenter's
// ReservedCapacity gate every launch outside a reserved NodePool opts out of open
// reservations. The reservations known are the Baseline's capacityReservationSelectorTerms
// with instanceMatchCriteria open (by term, since offline their instances are unknown) and
// known, the active open reservations with room (from describe-capacity-reservations),
// each judged against the types and zones the class's on-demand rungs allow, in the
// catalog the classes were rendered with (opts). now drops the reservations past their
// end; zero: the wall clock.
func OpenReservations(classes []Class, known []Reservation, opts render.Options, now time.Time) []Finding {
	cat, _ := priced(opts)
	if now.IsZero() {
		now = time.Now()
	}
	var findings []Finding
	for _, c := range classes {
		if c.Err != nil || c.Result == nil {
			continue
		}
		var onDemand []int
		reserved := false
		for i, rung := range c.Result.Rungs {
			switch rung.CapacityType {
			case v1alpha1.CapacityTypeReserved:
				reserved = true
			case v1alpha1.CapacityTypeOnDemand:
				onDemand = append(onDemand, i)
			}
		}
		if reserved || len(onDemand) == 0 {
			continue
		}
		obj := "WorkloadClass/" + c.Class.Name
		add := func(format string, args ...any) {
			findings = append(findings, Finding{Severity: Warning, Object: obj, Check: CheckOpenReservationsUnused, Message: fmt.Sprintf(format, args...)})
		}
		rungs := make([]string, len(onDemand))
		for i, r := range onDemand {
			rungs[i] = c.Result.NodePools[r].Name
		}
		subject := fmt.Sprintf("on-demand rungs of class %s (%s) %s", c.Class.Name, strings.Join(rungs, ", "), trapReason)
		if c.Baseline != nil {
			for i, term := range c.Baseline.Spec.NodeClass.CapacityReservationSelectorTerms {
				if term.InstanceMatchCriteria == "open" {
					add("%s the open capacity reservations Baseline %s selects (spec.nodeClass.capacityReservationSelectorTerms[%d]) stay billed and unused by this class; %s",
						subject, c.Baseline.Name, i, trapFix)
				}
			}
		}
		for _, r := range known {
			if r.InstanceMatchCriteria != "open" || (r.State != "" && r.State != "active") || r.AvailableInstanceCount == nil || *r.AvailableInstanceCount == 0 ||
				(r.EndDate != nil && !now.Before(*r.EndDate)) {
				continue
			}
			t, ok := cat.Types[r.InstanceType]
			if !ok {
				continue
			}
			for _, i := range onDemand {
				if allows(c.Result.NodePools[i], t, r.AvailabilityZone) {
					add("%s open reservation %s (%s, %s, %d available) stays billed and unused; %s",
						subject, r.ID, r.InstanceType, r.AvailabilityZone, *r.AvailableInstanceCount, trapFix)
					break
				}
			}
		}
	}
	return findings
}

// allows says whether a rung could launch type t in zone.
func allows(np *karpv1.NodePool, t *catalog.InstanceType, zone string) bool {
	if !t.Matches(np.Spec.Template.Spec.Requirements) {
		return false
	}
	zones := requirements(np).Get(corev1.LabelTopologyZone)
	return zones.Has(zone)
}
