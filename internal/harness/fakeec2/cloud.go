package fakeec2

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Defaults for Options.
var (
	DefaultRegion = "us-east-1"
	DefaultZones  = []string{"us-east-1a", "us-east-1b", "us-east-1c"}
)

// Options describe the simulated account.
type Options struct {
	// Region prices the types; DefaultRegion when empty.
	Region string
	// Zones offer every type, spot and on-demand; DefaultZones when empty.
	Zones []string
	// Types are the catalog's instance types the account offers. Types the catalog has
	// no facts or no price for in Region are an error.
	Types []string
	// DiscoveryTags tag the seeded subnets and security group, for selector terms to find.
	DiscoveryTags map[string]string
}

// Pool is one capacity pool: an instance type in a zone at a capacity type.
type Pool struct {
	InstanceType string
	Zone         string
	CapacityType string
}

func (p Pool) String() string { return p.InstanceType + "/" + p.Zone + "/" + p.CapacityType }

// Cloud is the simulated EC2 API: the provider's fake with the fixes this package
// documents. Methods not defined here are the fake's.
type Cloud struct {
	*fake.EC2API

	region   string
	zones    []string
	types    []*catalog.InstanceType
	prices   map[string]catalog.Price
	subnets  []ec2types.Subnet
	groups   []ec2types.SecurityGroup
	infos    []ec2types.InstanceTypeInfo
	zoneIDs  map[string]string
	pricing  *Pricing
	launches launchLog

	mu          sync.Mutex
	unavailable map[Pool]bool
	templates   map[string]launchTemplate
	next        int
	// reservations are the account's capacity reservations (reservations.go).
	reservations reservationState
}

// New seeds a simulated account with the catalog's facts and prices for opts.Types.
func New(cat *catalog.Catalog, opts Options) (*Cloud, error) {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if len(opts.Zones) == 0 {
		opts.Zones = DefaultZones
	}
	if len(opts.Types) == 0 {
		return nil, fmt.Errorf("no instance types to offer")
	}
	c := &Cloud{
		EC2API:       fake.NewEC2API(),
		region:       opts.Region,
		zones:        opts.Zones,
		prices:       map[string]catalog.Price{},
		zoneIDs:      map[string]string{},
		unavailable:  map[Pool]bool{},
		templates:    map[string]launchTemplate{},
		reservations: reservationState{all: map[string]*CapacityReservation{}, instances: map[string]string{}},
	}
	names := append([]string(nil), opts.Types...)
	sort.Strings(names)
	for _, name := range names {
		t, ok := cat.Types[name]
		if !ok || t.PriceOnly {
			return nil, fmt.Errorf("instance type %s: the catalog has no facts for it", name)
		}
		p, ok := cat.Prices[opts.Region][name]
		if !ok || p.OnDemand <= 0 {
			return nil, fmt.Errorf("instance type %s: the catalog has no on-demand price for it in %s", name, opts.Region)
		}
		c.types = append(c.types, t)
		c.prices[name] = p
		c.infos = append(c.infos, instanceTypeInfo(t, p))
	}
	tags := discoveryTags(opts.DiscoveryTags)
	for i, zone := range opts.Zones {
		id := fmt.Sprintf("use1-az%d", i+1)
		c.zoneIDs[zone] = id
		c.subnets = append(c.subnets, ec2types.Subnet{
			SubnetId:                aws.String("subnet-" + zone),
			AvailabilityZone:        aws.String(zone),
			AvailabilityZoneId:      aws.String(id),
			AvailableIpAddressCount: aws.Int32(4000),
			VpcId:                   aws.String("vpc-poolsmith"),
			Tags:                    append([]ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("private-" + zone)}}, tags...),
		})
	}
	c.groups = []ec2types.SecurityGroup{{
		GroupId: aws.String("sg-nodes"), GroupName: aws.String("nodes"), VpcId: aws.String("vpc-poolsmith"), Tags: tags,
	}}
	c.pricing = &Pricing{cloud: c}
	return c, nil
}

func discoveryTags(m map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// Region is the account's region.
func (c *Cloud) Region() string { return c.region }

// Zones are the account's availability zones.
func (c *Cloud) Zones() []string { return append([]string(nil), c.zones...) }

// Types are the instance types offered, sorted by name.
func (c *Cloud) Types() []*catalog.InstanceType {
	return append([]*catalog.InstanceType(nil), c.types...)
}

// PricingAPI is the AWS pricing API answering with the catalog's on-demand prices.
func (c *Cloud) PricingAPI() *Pricing { return c.pricing }

// Price is what a pool costs per hour: the catalog's on-demand price, or its regional
// average spot price in every zone.
func (c *Cloud) Price(p Pool) (float64, bool) {
	price, ok := c.prices[p.InstanceType]
	if !ok {
		return 0, false
	}
	if p.CapacityType == karpv1.CapacityTypeSpot {
		return price.SpotAvg, price.SpotAvg > 0
	}
	return price.OnDemand, true
}

// SetAvailable switches capacity on or off for every pool of the given instance types at
// capacityType in the given zones (every zone when none are named). A launch asking only
// for pools that are off fails with InsufficientInstanceCapacity, as EC2 would.
func (c *Cloud) SetAvailable(available bool, capacityType string, types []string, zones ...string) {
	if len(zones) == 0 {
		zones = c.zones
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range types {
		for _, z := range zones {
			p := Pool{InstanceType: t, Zone: z, CapacityType: capacityType}
			if available {
				delete(c.unavailable, p)
			} else {
				c.unavailable[p] = true
			}
		}
	}
}

// Available says whether a pool has capacity.
func (c *Cloud) Available(p Pool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.unavailable[p]
}

// DescribeAvailabilityZones lists the account's zones.
func (c *Cloud) DescribeAvailabilityZones(context.Context, *ec2.DescribeAvailabilityZonesInput, ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error) {
	out := &ec2.DescribeAvailabilityZonesOutput{}
	for _, z := range c.zones {
		out.AvailabilityZones = append(out.AvailabilityZones, ec2types.AvailabilityZone{
			ZoneName: aws.String(z), ZoneId: aws.String(c.zoneIDs[z]), ZoneType: aws.String("availability-zone"),
			RegionName: aws.String(c.region), State: ec2types.AvailabilityZoneStateAvailable,
		})
	}
	return out, nil
}

// DescribeSubnets filters the seeded subnets: selectors that match none find none.
func (c *Cloud) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	out := &ec2.DescribeSubnetsOutput{}
	for _, s := range c.subnets {
		if contains(in.SubnetIds, aws.ToString(s.SubnetId)) || len(in.Filters) > 0 && len(fake.FilterDescribeSubnets([]ec2types.Subnet{s}, in.Filters)) > 0 {
			out.Subnets = append(out.Subnets, s)
		}
	}
	return out, nil
}

// DescribeSecurityGroups filters the seeded security group.
func (c *Cloud) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	out := &ec2.DescribeSecurityGroupsOutput{}
	for _, g := range c.groups {
		if contains(in.GroupIds, aws.ToString(g.GroupId)) || len(in.Filters) > 0 && len(fake.FilterDescribeSecurtyGroups([]ec2types.SecurityGroup{g}, in.Filters)) > 0 {
			out.SecurityGroups = append(out.SecurityGroups, g)
		}
	}
	return out, nil
}

// DescribeInstanceTypes lists the offered types with the catalog's facts.
func (c *Cloud) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: append([]ec2types.InstanceTypeInfo(nil), c.infos...)}, nil
}

// DescribeInstanceTypeOfferings offers every type in every zone.
func (c *Cloud) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	out := &ec2.DescribeInstanceTypeOfferingsOutput{}
	for _, t := range c.types {
		for _, z := range c.zones {
			out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{
				InstanceType: ec2types.InstanceType(t.Name), Location: aws.String(z), LocationType: ec2types.LocationTypeAvailabilityZone,
			})
		}
	}
	return out, nil
}

// DescribeImages answers image ids and names with images whose architecture follows
// the id or name (see SSM), created at a fixed date.
func (c *Cloud) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	ids := append([]string(nil), in.ImageIds...)
	var names []string
	for _, f := range in.Filters {
		switch aws.ToString(f.Name) {
		case "image-id":
			ids = append(ids, f.Values...)
		case "name":
			names = append(names, f.Values...)
		}
	}
	out := &ec2.DescribeImagesOutput{}
	for _, id := range ids {
		out.Images = append(out.Images, image(id, id))
	}
	for _, n := range names {
		name := strings.ReplaceAll(n, "*", "v20260101")
		out.Images = append(out.Images, image(AMIID(name), name))
	}
	return out, nil
}

func image(id, name string) ec2types.Image {
	arch := ec2types.ArchitectureValuesX8664
	if strings.Contains(name, "arm64") || strings.Contains(name, "aarch64") {
		arch = ec2types.ArchitectureValuesArm64
	}
	return ec2types.Image{
		ImageId: aws.String(id), Name: aws.String(name), Architecture: arch, OwnerId: aws.String("amazon"),
		CreationDate: aws.String("2026-01-01T00:00:00.000Z"), State: ec2types.ImageStateAvailable,
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
