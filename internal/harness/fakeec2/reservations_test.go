package fakeec2_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/patrickmn/go-cache"
	"k8s.io/utils/clock"

	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
)

// template creates launch template name through the cloud as Karpenter's launch template
// provider does under its ReservedCapacity gate: preference, and the target for a
// reserved launch.
func template(t *testing.T, c *fakeec2.Cloud, name string, preference ec2types.CapacityReservationPreference, target string) {
	t.Helper()
	spec := &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{CapacityReservationPreference: preference}
	if target != "" {
		spec.CapacityReservationTarget = &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(target)}
	}
	if preference == "" {
		spec = nil
	}
	_, err := c.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1"), CapacityReservationSpecification: spec},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fleetThrough(name, capacityType string, overrides ...ec2types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	in := fleet(capacityType, false, overrides...)
	in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName = aws.String(name)
	return in
}

func reservation(t *testing.T, c *fakeec2.Cloud, id string) fakeec2.CapacityReservation {
	t.Helper()
	for _, r := range c.CapacityReservations() {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no reservation %s in %+v", id, c.CapacityReservations())
	return fakeec2.CapacityReservation{}
}

func instance(t *testing.T, c *fakeec2.Cloud, id string) ec2types.Instance {
	t.Helper()
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 {
		t.Fatalf("describing %s: %v %+v", id, err, out)
	}
	return out.Reservations[0].Instances[0]
}

// A targeted reservation of two: Karpenter's reserved launches (a template with
// capacity-reservations-only and the target) take its slots one by one, each instance
// reads back as EC2 reports a reserved one, the third launch is refused with the code
// Karpenter falls to its next NodePool on, and terminating an instance frees its slot.
func TestTargetedReservationLaunchesUntilFullThenRefusesAndTerminateFrees(t *testing.T) {
	c := newCloud(t)
	ctx := context.Background()
	if err := c.AddCapacityReservation(fakeec2.CapacityReservation{ID: "cr-1", InstanceType: "m7g.large", Zone: "us-east-1b", Count: 2, Match: ec2types.InstanceMatchCriteriaTargeted}); err != nil {
		t.Fatal(err)
	}
	template(t, c, "reserved", ec2types.CapacityReservationPreferenceCapacityReservationsOnly, "cr-1")
	// m7g.large on-demand off everywhere: a reserved launch draws on its reservation, not the pool.
	c.SetAvailable(false, "on-demand", []string{"m7g.large"})
	var ids []string
	for i := range 2 {
		out, err := c.CreateFleet(ctx, fleetThrough("reserved", "on-demand", override("m7g.large", "us-east-1b")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("launch %d: %v, %+v", i+1, err, out)
		}
		id := out.Instances[0].InstanceIds[0]
		ids = append(ids, id)
		got := instance(t, c, id)
		if aws.ToString(got.CapacityReservationId) != "cr-1" || got.CapacityReservationSpecification == nil ||
			got.CapacityReservationSpecification.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly {
			t.Errorf("launch %d: instance %+v lacks reservation cr-1 with preference capacity-reservations-only", i+1, got)
		}
		if r := reservation(t, c, "cr-1"); r.Available != 1-i {
			t.Errorf("after launch %d: %d available, want %d", i+1, r.Available, 1-i)
		}
	}
	launches := c.Launches()
	if l := launches[len(launches)-1]; l.Reservation != "cr-1" || l.Preference != "capacity-reservations-only" {
		t.Errorf("launch recorded reservation %q preference %q", l.Reservation, l.Preference)
	}

	out, err := c.CreateFleet(ctx, fleetThrough("reserved", "on-demand", override("m7g.large", "us-east-1b")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
		t.Fatalf("a full reservation launched %+v, errors %+v; want ReservationCapacityExceeded", out.Instances, out.Errors)
	}

	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	if r := reservation(t, c, "cr-1"); r.Available != 1 {
		t.Errorf("after terminating one: %d available, want 1", r.Available)
	}
	// A second terminate of the same instance returns nothing.
	_, _ = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	if r := reservation(t, c, "cr-1"); r.Available != 1 {
		t.Errorf("after terminating it again: %d available, want 1", r.Available)
	}
	if out, _ := c.CreateFleet(ctx, fleetThrough("reserved", "on-demand", override("m7g.large", "us-east-1b"))); len(out.Instances) != 1 {
		t.Errorf("the freed slot did not launch: %+v", out.Errors)
	}
	// Terminating the other frees a slot, which another account then takes (a shared
	// reservation): the next launch is refused again.
	_, _ = c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[1:]})
	if err := c.SetReservationAvailable("cr-1", 0); err != nil {
		t.Fatal(err)
	}
	if out, _ := c.CreateFleet(ctx, fleetThrough("reserved", "on-demand", override("m7g.large", "us-east-1b"))); len(out.Instances) != 0 {
		t.Errorf("launched into a reservation another account filled: %+v", out.Instances)
	}
}

// The trap, and what the gate changes: Karpenter's on-demand launches under its
// ReservedCapacity gate carry preference none and leave an open reservation of the very
// type and zone untouched; with preference open (or none given, the gate off) the launch
// takes its slot, and the instance is on-demand (preference open), not reserved.
func TestOpenReservationIsUsedOnlyByLaunchesThatAllowIt(t *testing.T) {
	c := newCloud(t)
	ctx := context.Background()
	if err := c.AddCapacityReservation(fakeec2.CapacityReservation{ID: "cr-open", InstanceType: "c7g.large", Zone: "us-east-1a", Count: 3}); err != nil {
		t.Fatal(err)
	}
	template(t, c, "none", ec2types.CapacityReservationPreferenceNone, "")
	out, _ := c.CreateFleet(ctx, fleetThrough("none", "on-demand", override("c7g.large", "us-east-1a")))
	if len(out.Instances) != 1 {
		t.Fatalf("no launch: %+v", out.Errors)
	}
	if got := instance(t, c, out.Instances[0].InstanceIds[0]); got.CapacityReservationId != nil {
		t.Errorf("preference none launched into reservation %s", aws.ToString(got.CapacityReservationId))
	}
	if r := reservation(t, c, "cr-open"); r.Available != 3 {
		t.Errorf("preference none: %d available, want 3 (untouched)", r.Available)
	}

	for i, name := range []string{"open", "gate-off"} {
		pref := ec2types.CapacityReservationPreferenceOpen
		if name == "gate-off" {
			pref = ""
		}
		template(t, c, name, pref, "")
		out, _ := c.CreateFleet(ctx, fleetThrough(name, "on-demand", override("c7g.large", "us-east-1a")))
		if len(out.Instances) != 1 {
			t.Fatalf("%s: no launch: %+v", name, out.Errors)
		}
		got := instance(t, c, out.Instances[0].InstanceIds[0])
		if aws.ToString(got.CapacityReservationId) != "cr-open" || got.CapacityReservationSpecification.CapacityReservationPreference != ec2types.CapacityReservationPreferenceOpen {
			t.Errorf("%s: instance %+v did not take the open reservation with preference open", name, got)
		}
		if r := reservation(t, c, "cr-open"); r.Available != 2-i {
			t.Errorf("%s: %d available, want %d", name, r.Available, 2-i)
		}
	}
	// Spot never uses a reservation, and another zone is not the reservation's.
	template(t, c, "open-spot", ec2types.CapacityReservationPreferenceOpen, "")
	_, _ = c.CreateFleet(ctx, fleetThrough("open-spot", "spot", override("c7g.large", "us-east-1a")))
	_, _ = c.CreateFleet(ctx, fleetThrough("open-spot", "on-demand", override("c7g.large", "us-east-1c")))
	if r := reservation(t, c, "cr-open"); r.Available != 1 {
		t.Errorf("a spot or other-zone launch took a slot: %d available, want 1", r.Available)
	}
}

// Karpenter's own capacity reservation provider, given the EC2NodeClass's selector
// terms, finds the reservations the account has: by id, by tag, by match criteria, with
// the live free count, and not an expired one, nor one of another owner.
func TestKarpentersProviderDiscoversReservationsBySelectorTerms(t *testing.T) {
	c := newCloud(t)
	for _, r := range []fakeec2.CapacityReservation{
		{ID: "cr-id", InstanceType: "m7g.large", Zone: "us-east-1a", Count: 2, Match: ec2types.InstanceMatchCriteriaTargeted},
		{ID: "cr-tagged", InstanceType: "c7g.large", Zone: "us-east-1b", Count: 4, Tags: map[string]string{"team": "api"}},
		{ID: "cr-expired", InstanceType: "c7g.large", Zone: "us-east-1b", Count: 4, Tags: map[string]string{"team": "api"}, End: time.Now().Add(-time.Hour)},
		{ID: "cr-other-owner", InstanceType: "c7g.large", Zone: "us-east-1b", Count: 4, Tags: map[string]string{"team": "api"}, OwnerID: "210987654321"},
	} {
		if err := c.AddCapacityReservation(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetReservationAvailable("cr-tagged", 1); err != nil {
		t.Fatal(err)
	}
	list := func(terms ...awsv1.CapacityReservationSelectorTerm) map[string]int32 {
		t.Helper()
		p := capacityreservation.NewProvider(c, clock.RealClock{}, cache.New(time.Minute, time.Minute), cache.New(time.Hour, time.Minute))
		got, err := p.List(context.Background(), terms...)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int32{}
		for _, r := range got {
			out[aws.ToString(r.CapacityReservationId)] = aws.ToInt32(r.AvailableInstanceCount)
		}
		return out
	}
	for name, tc := range map[string]struct {
		terms []awsv1.CapacityReservationSelectorTerm
		want  map[string]int32
	}{
		"by id":               {[]awsv1.CapacityReservationSelectorTerm{{ID: "cr-id"}}, map[string]int32{"cr-id": 2}},
		"by an unknown id":    {[]awsv1.CapacityReservationSelectorTerm{{ID: "cr-nowhere"}}, map[string]int32{}},
		"by tag and owner":    {[]awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "api"}, OwnerID: fakeec2.DefaultOwnerID}}, map[string]int32{"cr-tagged": 1}},
		"open ones":           {[]awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "open"}}, map[string]int32{"cr-tagged": 1, "cr-other-owner": 4}},
		"targeted ones":       {[]awsv1.CapacityReservationSelectorTerm{{InstanceMatchCriteria: "targeted"}}, map[string]int32{"cr-id": 2}},
		"tag with a wildcard": {[]awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "*"}}}, map[string]int32{"cr-tagged": 1, "cr-other-owner": 4}},
	} {
		t.Run(name, func(t *testing.T) {
			got := list(tc.terms...)
			if len(got) != len(tc.want) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
			for id, n := range tc.want {
				if got[id] != n {
					t.Errorf("found %v, want %v", got, tc.want)
				}
			}
		})
	}
}
