package fakeec2

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// launchTemplate is what a launched instance inherits from its template, and the
// capacity reservation preference (and target) a launch through it has.
type launchTemplate struct {
	image      string
	groups     []string
	preference ec2types.CapacityReservationPreference
	target     string
}

// Override is one (instance type, zone) Karpenter offered the fleet, with the priority it
// asked for (set only when NodeOverlays adjusted prices).
type Override struct {
	Pool
	Priority *float64
}

// Launch records one CreateFleet call.
type Launch struct {
	// Prioritized is set when Karpenter asked for a prioritized allocation strategy.
	Prioritized bool
	// Overrides are every override Karpenter sent, in its order.
	Overrides []Override
	// Dropped are the overrides whose pool was off.
	Dropped []Pool
	// Chosen is the pool launched; empty when every pool was off.
	Chosen Pool
	// InstanceID is the instance launched.
	InstanceID string
	// Tags are the instance's launch tags.
	Tags map[string]string
	// Preference is the CapacityReservationPreference of the chosen override's launch
	// template (capacity-reservations-only, open or none; empty without one).
	Preference string `json:",omitempty"`
	// Reservation is the capacity reservation the instance took a slot of; empty for none.
	Reservation string `json:",omitempty"`
}

type launchLog struct {
	mu  sync.Mutex
	all []Launch
}

// Launches returns every CreateFleet call so far, oldest first.
func (c *Cloud) Launches() []Launch {
	c.launches.mu.Lock()
	defer c.launches.mu.Unlock()
	return append([]Launch(nil), c.launches.all...)
}

// CreateLaunchTemplate remembers each template's AMI and security groups, which the
// fake forgets, so launched instances report them (else every NodeClaim drifts at once),
// and its capacity reservation preference and target, which CreateFleet honours.
func (c *Cloud) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, o ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	if !aws.ToBool(in.DryRun) && in.LaunchTemplateData != nil {
		lt := launchTemplate{image: aws.ToString(in.LaunchTemplateData.ImageId), groups: in.LaunchTemplateData.SecurityGroupIds}
		for _, ni := range in.LaunchTemplateData.NetworkInterfaces {
			lt.groups = append(lt.groups, ni.Groups...)
		}
		if crs := in.LaunchTemplateData.CapacityReservationSpecification; crs != nil {
			lt.preference = crs.CapacityReservationPreference
			if crs.CapacityReservationTarget != nil {
				lt.target = aws.ToString(crs.CapacityReservationTarget.CapacityReservationId)
			}
		}
		c.mu.Lock()
		c.templates[aws.ToString(in.LaunchTemplateName)] = lt
		c.mu.Unlock()
	}
	return c.EC2API.CreateLaunchTemplate(ctx, in, o...)
}

// candidate is an override with the template it came from.
type candidate struct {
	Override
	subnet      string
	image       string
	template    string
	price       float64
	order       int
	preference  ec2types.CapacityReservationPreference
	reservation string
}

// CreateFleet launches TotalTargetCapacity instances (one per NodeClaim; Karpenter batches
// identical requests) in the best
// available pool: the highest priority (lowest number) when the request is prioritized,
// else the cheapest, ties in Karpenter's order. Pools that are off are reported as
// InsufficientInstanceCapacity, which makes Karpenter mark those offerings unavailable.
//
// Capacity reservations follow each override's launch template (reservationFor): a
// template targeting a reservation (capacity-reservations-only, Karpenter's reserved
// launches) launches into it, or answers ReservationCapacityExceeded once it has no room;
// preference none (every other launch under Karpenter's ReservedCapacity gate) never
// uses one; open, or none given, takes a slot of an open reservation of the pool.
func (c *Cloud) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	if aws.ToBool(in.DryRun) {
		return &ec2.CreateFleetOutput{}, &smithy.GenericAPIError{Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set"}
	}
	if in.TargetCapacitySpecification == nil {
		return nil, fmt.Errorf("CreateFleet: no target capacity specification")
	}
	capacityType := string(in.TargetCapacitySpecification.DefaultTargetCapacityType)
	// Karpenter's CreateFleet batcher merges identical requests made at once into one with
	// TotalTargetCapacity of their count and hands one instance to each; like EC2, launch
	// them all (one short and the batcher reports an error without overrides, on which
	// Karpenter v1.15.0's launch path panics).
	count := max(1, int(aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity)))
	launch := Launch{Prioritized: prioritized(in), Tags: map[string]string{}}
	var candidates []candidate
	out := &ec2.CreateFleetOutput{}
	for _, ltc := range in.LaunchTemplateConfigs {
		template := ""
		if ltc.LaunchTemplateSpecification != nil {
			template = aws.ToString(ltc.LaunchTemplateSpecification.LaunchTemplateName)
		}
		for _, o := range ltc.Overrides {
			pool := Pool{InstanceType: string(o.InstanceType), Zone: aws.ToString(o.AvailabilityZone), CapacityType: capacityType}
			launch.Overrides = append(launch.Overrides, Override{Pool: pool, Priority: o.Priority})
			c.mu.Lock()
			lt := c.templates[template]
			reservation, code := c.reservationFor(lt, pool, count)
			c.mu.Unlock()
			// A targeted launch draws on its reservation, not on the pool.
			targeted := lt.preference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly
			if code == "" && !targeted && !c.Available(pool) {
				code = "InsufficientInstanceCapacity"
			}
			if code != "" {
				launch.Dropped = append(launch.Dropped, pool)
				out.Errors = append(out.Errors, ec2types.CreateFleetError{
					ErrorCode:    aws.String(code),
					ErrorMessage: aws.String(fmt.Sprintf("%s: no %s capacity for %s (reservation %s)", code, capacityType, pool, lt.target)),
					LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
						InstanceType: o.InstanceType, AvailabilityZone: o.AvailabilityZone,
					}},
				})
				continue
			}
			price, ok := c.Price(pool)
			if !ok {
				price = 1e9
			}
			candidates = append(candidates, candidate{Override: Override{Pool: pool, Priority: o.Priority},
				subnet: aws.ToString(o.SubnetId), image: aws.ToString(o.ImageId), template: template, price: price, order: len(candidates),
				preference: lt.preference, reservation: reservation})
		}
	}
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			for _, t := range ts.Tags {
				launch.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
		}
	}
	if len(candidates) == 0 {
		c.record(launch)
		return out, nil
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if launch.Prioritized && a.Priority != nil && b.Priority != nil && *a.Priority != *b.Priority {
			return *a.Priority < *b.Priority
		}
		if a.price != b.price {
			return a.price < b.price
		}
		return a.order < b.order
	})
	chosen := candidates[0]
	var ids []string
	var image string
	var instanceType ec2types.InstanceType
	for range count {
		c.mu.Lock()
		c.next++
		id := fmt.Sprintf("i-%017x", c.next)
		lt := c.templates[chosen.template]
		if chosen.reservation != "" {
			c.takeSlot(chosen.reservation, id)
		}
		c.mu.Unlock()
		image = chosen.image
		if image == "" {
			image = lt.image
		}
		instance := ec2types.Instance{
			InstanceId:     aws.String(id),
			InstanceType:   ec2types.InstanceType(chosen.InstanceType),
			ImageId:        aws.String(image),
			SubnetId:       aws.String(chosen.subnet),
			Placement:      &ec2types.Placement{AvailabilityZone: aws.String(chosen.Zone), AvailabilityZoneId: aws.String(c.zoneIDs[chosen.Zone])},
			PrivateDnsName: aws.String(fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", c.next/250, c.next%250)),
			LaunchTime:     aws.Time(time.Now()),
			State:          &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
			Architecture:   ec2types.ArchitectureValues(archOf(c, chosen.InstanceType)),
		}
		for _, g := range lt.groups {
			instance.SecurityGroups = append(instance.SecurityGroups, ec2types.GroupIdentifier{GroupId: aws.String(g)})
		}
		for k, v := range launch.Tags {
			instance.Tags = append(instance.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		if capacityType == karpv1.CapacityTypeSpot {
			instance.SpotInstanceRequestId = aws.String("sir-" + id[2:])
			instance.InstanceLifecycle = ec2types.InstanceLifecycleTypeSpot
		}
		// What EC2 reports and Karpenter reads back: an instance is reserved only with a
		// reservation id and preference capacity-reservations-only.
		preference := chosen.preference
		if chosen.reservation != "" && preference == "" {
			preference = ec2types.CapacityReservationPreferenceOpen
		}
		if preference != "" {
			instance.CapacityReservationSpecification = &ec2types.CapacityReservationSpecificationResponse{CapacityReservationPreference: preference}
		}
		if chosen.reservation != "" {
			instance.CapacityReservationId = aws.String(chosen.reservation)
			instance.CapacityReservationSpecification.CapacityReservationTarget = &ec2types.CapacityReservationTargetResponse{CapacityReservationId: aws.String(chosen.reservation)}
		}
		c.EC2API.Instances.Store(id, instance)
		one := launch
		one.Chosen, one.InstanceID = chosen.Pool, id
		one.Preference, one.Reservation = string(chosen.preference), chosen.reservation
		c.record(one)
		ids = append(ids, id)
		instanceType = instance.InstanceType
	}
	out.Instances = []ec2types.CreateFleetInstance{{
		InstanceIds:  ids,
		InstanceType: instanceType,
		Lifecycle:    ec2types.InstanceLifecycle(capacityType),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			SubnetId: aws.String(chosen.subnet), ImageId: aws.String(image), InstanceType: instanceType, AvailabilityZone: aws.String(chosen.Zone),
		}},
	}}
	return out, nil
}

func (c *Cloud) record(l Launch) {
	c.launches.mu.Lock()
	defer c.launches.mu.Unlock()
	c.launches.all = append(c.launches.all, l)
}

func prioritized(in *ec2.CreateFleetInput) bool {
	if in.SpotOptions != nil && in.SpotOptions.AllocationStrategy == ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized {
		return true
	}
	return in.OnDemandOptions != nil && in.OnDemandOptions.AllocationStrategy == ec2types.FleetOnDemandAllocationStrategyPrioritized
}

func archOf(c *Cloud, name string) string {
	for _, t := range c.types {
		if t.Name == name && t.Arch == "arm64" {
			return string(ec2types.ArchitectureValuesArm64)
		}
	}
	return string(ec2types.ArchitectureValuesX8664)
}
