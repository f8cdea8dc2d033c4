package fakeec2

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
	"github.com/aws/smithy-go"
)

// DefaultOwnerID is the account that owns a CapacityReservation without an OwnerID.
const DefaultOwnerID = "123456789012"

// CapacityReservation is an On-Demand Capacity Reservation (or a Capacity Block) in the
// simulated account: Count instances of InstanceType in Zone, of which Available are free.
type CapacityReservation struct {
	ID           string `json:"id"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	Count        int    `json:"count"`
	// Available is the free count; Count when AddCapacityReservation is given 0.
	Available int `json:"available"`
	// Match is open (any matching launch that allows open reservations uses it) or
	// targeted (only launches that name it); open when empty.
	Match ec2types.InstanceMatchCriteria `json:"match,omitempty"`
	// Type is default (an ODCR) or capacity-block; default when empty.
	Type ec2types.CapacityReservationType `json:"type,omitempty"`
	// Interruptible marks an interruptible reservation.
	Interruptible bool `json:"interruptible,omitempty"`
	// End is when the reservation expires; none when zero. Past it, it is listed as expired.
	End time.Time `json:"end,omitzero"`
	// Tags are the reservation's tags, for selector terms to find.
	Tags map[string]string `json:"tags,omitempty"`
	// OwnerID is the owning account; DefaultOwnerID when empty.
	OwnerID string `json:"ownerID,omitempty"`
}

// reservationState is what the account tracks of its reservations.
type reservationState struct {
	all map[string]*CapacityReservation
	// instances maps a launched instance to the reservation it holds a slot of.
	instances map[string]string
}

// AddCapacityReservation creates a reservation (or replaces the one with its id). It is
// an error when the type is not offered or the zone is not the account's.
func (c *Cloud) AddCapacityReservation(r CapacityReservation) error {
	if r.ID == "" || r.Count < 1 {
		return fmt.Errorf("capacity reservation %q: an id and a count of at least 1 are required", r.ID)
	}
	if _, ok := c.prices[r.InstanceType]; !ok {
		return fmt.Errorf("capacity reservation %s: instance type %s is not offered", r.ID, r.InstanceType)
	}
	if !contains(c.zones, r.Zone) {
		return fmt.Errorf("capacity reservation %s: zone %s is not one of %v", r.ID, r.Zone, c.zones)
	}
	if r.Available <= 0 || r.Available > r.Count {
		r.Available = r.Count
	}
	if r.Match == "" {
		r.Match = ec2types.InstanceMatchCriteriaOpen
	}
	if r.Type == "" {
		r.Type = ec2types.CapacityReservationTypeDefault
	}
	if r.OwnerID == "" {
		r.OwnerID = DefaultOwnerID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reservations.all[r.ID] = &r
	return nil
}

// SetReservationAvailable sets a reservation's free count, as another account using a
// shared reservation would: Karpenter learns of it at its next sync or launch failure.
func (c *Cloud) SetReservationAvailable(id string, available int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.reservations.all[id]
	if !ok {
		return fmt.Errorf("no capacity reservation %s", id)
	}
	r.Available = min(max(0, available), r.Count)
	return nil
}

// CapacityReservations returns the account's reservations with their free counts, by id.
func (c *Cloud) CapacityReservations() []CapacityReservation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]CapacityReservation, 0, len(c.reservations.all))
	for _, r := range c.reservations.all {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DescribeCapacityReservations lists the reservations with their live counts, filtered by
// ids and by the filters Karpenter sends (state, owner-id, tag:K, tag-key,
// instance-match-criteria). A reservation past its end is expired. Naming an id that does
// not exist is InvalidCapacityReservationId.NotFound, as in EC2.
func (c *Cloud) DescribeCapacityReservations(_ context.Context, in *ec2.DescribeCapacityReservationsInput, _ ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	now := time.Now()
	var all []ec2types.CapacityReservation
	for _, r := range c.CapacityReservations() {
		all = append(all, r.describe(now))
	}
	for _, id := range in.CapacityReservationIds {
		if !containsReservation(all, id) {
			return nil, &smithy.GenericAPIError{Code: "InvalidCapacityReservationId.NotFound", Message: fmt.Sprintf("The capacity reservation ID '%s' does not exist", id)}
		}
	}
	return &ec2.DescribeCapacityReservationsOutput{CapacityReservations: fake.FilterDescribeCapacityReservations(all, in.CapacityReservationIds, in.Filters)}, nil
}

func (r CapacityReservation) describe(now time.Time) ec2types.CapacityReservation {
	state := ec2types.CapacityReservationStateActive
	if !r.End.IsZero() && !now.Before(r.End) {
		state = ec2types.CapacityReservationStateExpired
	}
	out := ec2types.CapacityReservation{
		CapacityReservationId:  aws.String(r.ID),
		CapacityReservationArn: aws.String("arn:aws:ec2:us-east-1:" + r.OwnerID + ":capacity-reservation/" + r.ID),
		OwnerId:                aws.String(r.OwnerID),
		InstanceType:           aws.String(r.InstanceType),
		InstancePlatform:       ec2types.CapacityReservationInstancePlatformLinuxUnix,
		AvailabilityZone:       aws.String(r.Zone),
		Tenancy:                ec2types.CapacityReservationTenancyDefault,
		TotalInstanceCount:     aws.Int32(int32(r.Count)),
		AvailableInstanceCount: aws.Int32(int32(r.Available)),
		InstanceMatchCriteria:  r.Match,
		ReservationType:        r.Type,
		Interruptible:          aws.Bool(r.Interruptible),
		State:                  state,
		Tags:                   discoveryTags(r.Tags),
	}
	if !r.End.IsZero() {
		out.EndDate = aws.Time(r.End)
		out.EndDateType = ec2types.EndDateTypeLimited
	} else {
		out.EndDateType = ec2types.EndDateTypeUnlimited
	}
	return out
}

func containsReservation(all []ec2types.CapacityReservation, id string) bool {
	for _, r := range all {
		if aws.ToString(r.CapacityReservationId) == id {
			return true
		}
	}
	return false
}

// reservationFor is the reservation a launch of pool through a template with the given
// preference takes a slot of, and whether it may launch at all:
//   - capacity-reservations-only: only the template's target, of the pool's type and zone,
//     with room; none else (ReservationCapacityExceeded, or an invalid target);
//   - none: never a reservation;
//   - open, or no preference (Karpenter with its ReservedCapacity gate off): an active
//     open reservation of the pool's type and zone with room, if there is one.
//
// The caller holds c.mu.
func (c *Cloud) reservationFor(lt launchTemplate, pool Pool, count int) (id string, errCode string) {
	now := time.Now()
	live := func(r *CapacityReservation) bool {
		return r.InstanceType == pool.InstanceType && r.Zone == pool.Zone && (r.End.IsZero() || now.Before(r.End))
	}
	switch lt.preference {
	case ec2types.CapacityReservationPreferenceCapacityReservationsOnly:
		r, ok := c.reservations.all[lt.target]
		if !ok || !live(r) {
			return "", "InvalidCapacityReservationId.NotFound"
		}
		if r.Available < count {
			return "", "ReservationCapacityExceeded"
		}
		return r.ID, ""
	case ec2types.CapacityReservationPreferenceNone:
		return "", ""
	}
	if pool.CapacityType != "on-demand" {
		return "", ""
	}
	ids := make([]string, 0, len(c.reservations.all))
	for id := range c.reservations.all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := c.reservations.all[id]
		if r.Match == ec2types.InstanceMatchCriteriaOpen && live(r) && r.Available >= count {
			return id, ""
		}
	}
	return "", ""
}

// takeSlot records that instance holds a slot of the reservation. The caller holds c.mu.
func (c *Cloud) takeSlot(reservation, instance string) {
	c.reservations.all[reservation].Available--
	c.reservations.instances[instance] = reservation
}

// TerminateInstances terminates the instances (the provider fake's behaviour) and returns
// each one's slot to the reservation it held.
func (c *Cloud) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, o ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	out, err := c.EC2API.TerminateInstances(ctx, in, o...)
	if err != nil {
		return out, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, change := range out.TerminatingInstances {
		id := aws.ToString(change.InstanceId)
		if res, ok := c.reservations.instances[id]; ok {
			delete(c.reservations.instances, id)
			if r, ok := c.reservations.all[res]; ok && r.Available < r.Count {
				r.Available++
			}
		}
	}
	return out, nil
}
