package fakeec2_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/harness/fakeec2"
)

func newCloud(t *testing.T) *fakeec2.Cloud {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	c, err := fakeec2.New(cat, fakeec2.Options{Types: []string{"c7g.large", "m7g.large", "c7g.xlarge"}, DiscoveryTags: map[string]string{"karpenter.sh/discovery": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fleet(capacityType string, prioritized bool, overrides ...ec2types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	in := &ec2.CreateFleetInput{
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType), TotalTargetCapacity: aws.Int32(1),
		},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt")},
			Overrides:                   overrides,
		}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("p")}}}},
	}
	if prioritized {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized}
	}
	return in
}

func override(typ, zone string, priority ...float64) ec2types.FleetLaunchTemplateOverridesRequest {
	o := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(typ), AvailabilityZone: aws.String(zone), SubnetId: aws.String("subnet-" + zone)}
	if len(priority) > 0 {
		o.Priority = aws.Float64(priority[0])
	}
	return o
}

func TestFleetLaunchesTheCheapestAvailablePoolAndReportsTheOthers(t *testing.T) {
	c := newCloud(t)
	ctx := context.Background()
	// Karpenter sends c7g.large first; on spot m7g.large is cheaper in the catalog and must win.
	out, err := c.CreateFleet(ctx, fleet("spot", false, override("c7g.large", "us-east-1a"), override("m7g.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Instances[0].InstanceType); got != "m7g.large" {
		t.Errorf("launched %s, want the cheaper m7g.large", got)
	}

	// With m7g.large off in that zone the fleet must launch the other type, not the cheapest.
	c.SetAvailable(false, "spot", []string{"m7g.large"}, "us-east-1a")
	out, err = c.CreateFleet(ctx, fleet("spot", false, override("m7g.large", "us-east-1a"), override("c7g.large", "us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || string(out.Instances[0].InstanceType) != "c7g.large" {
		t.Fatalf("instances %+v, want one c7g.large", out.Instances)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" || out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "m7g.large" {
		t.Errorf("errors %+v, want InsufficientInstanceCapacity for m7g.large", out.Errors)
	}

	// On-demand capacity is a separate pool, untouched.
	out, _ = c.CreateFleet(ctx, fleet("on-demand", false, override("m7g.large", "us-east-1a")))
	if len(out.Instances) != 1 {
		t.Errorf("on-demand m7g.large did not launch: %+v", out.Errors)
	}

	// Every pool off: no instance, every override reported.
	c.SetAvailable(false, "spot", []string{"c7g.large"})
	out, _ = c.CreateFleet(ctx, fleet("spot", false, override("c7g.large", "us-east-1a"), override("m7g.large", "us-east-1a")))
	if len(out.Instances) != 0 || len(out.Errors) != 2 {
		t.Errorf("with every pool off got instances %+v, errors %d", out.Instances, len(out.Errors))
	}
	c.SetAvailable(true, "spot", []string{"c7g.large", "m7g.large"})
	if !c.Available(fakeec2.Pool{InstanceType: "c7g.large", Zone: "us-east-1a", CapacityType: "spot"}) {
		t.Error("c7g.large spot still off after switching it back on")
	}
	if n := len(c.Launches()); n != 4 {
		t.Errorf("recorded %d launches, want 4", n)
	}
}

func TestPrioritizedFleetHonoursPriorityOverPrice(t *testing.T) {
	c := newCloud(t)
	out, err := c.CreateFleet(context.Background(), fleet("spot", true, override("c7g.large", "us-east-1a", 2), override("c7g.xlarge", "us-east-1b", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Instances[0].InstanceType); got != "c7g.xlarge" {
		t.Errorf("launched %s, want c7g.xlarge (priority 1) over the cheaper c7g.large", got)
	}
	inst, _ := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})
	got := inst.Reservations[0].Instances[0]
	if aws.ToString(got.SubnetId) != "subnet-us-east-1b" || aws.ToString(got.Placement.AvailabilityZone) != "us-east-1b" || len(got.Tags) != 1 || got.SpotInstanceRequestId == nil {
		t.Errorf("instance lacks its subnet, zone, launch tags or spot request: %+v", got)
	}
}

func TestSubnetSelectorsThatMatchNothingFindNothing(t *testing.T) {
	c := newCloud(t)
	tag := func(v string) *ec2.DescribeSubnetsInput {
		return &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{v}}}}
	}
	if out, _ := c.DescribeSubnets(context.Background(), tag("test")); len(out.Subnets) != 3 {
		t.Errorf("found %d subnets for the discovery tag, want 3", len(out.Subnets))
	}
	if out, _ := c.DescribeSubnets(context.Background(), tag("nowhere")); len(out.Subnets) != 0 {
		t.Errorf("found %d subnets for an unknown tag, want 0", len(out.Subnets))
	}
}

// Karpenter's batcher merges identical launches made at once into one CreateFleet with
// TotalTargetCapacity of their count and gives each NodeClaim one instance: EC2 launches
// them all, and so must the fake (one short, Karpenter v1.15.0 panics on the error the
// batcher makes up for the missing ones).
func TestFleetLaunchesTheTotalTargetCapacity(t *testing.T) {
	c := newCloud(t)
	in := fleet("on-demand", false, override("c7g.large", "us-east-1a"))
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(3)
	out, err := c.CreateFleet(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 0 || len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 3 {
		t.Fatalf("want 3 instances and no error, got instances %+v errors %+v", out.Instances, out.Errors)
	}
	ids := map[string]bool{}
	for _, l := range c.Launches() {
		ids[l.InstanceID] = l.Chosen.InstanceType == "c7g.large"
	}
	if len(ids) != 3 || !ids[out.Instances[0].InstanceIds[2]] {
		t.Fatalf("launches %+v, want three distinct c7g.large instances", c.Launches())
	}
}
