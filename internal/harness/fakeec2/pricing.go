package fakeec2

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Pricing is the AWS pricing API: GetProducts lists the catalog's on-demand price of every
// offered type, whatever the filter (Karpenter asks separately for bare-metal types and
// needs an answer to both).
type Pricing struct {
	cloud *Cloud
}

// GetProducts returns one price item per offered type.
func (p *Pricing) GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	out := &pricing.GetProductsOutput{}
	for _, t := range p.cloud.types {
		out.PriceList = append(out.PriceList, fake.NewOnDemandPrice(t.Name, p.cloud.prices[t.Name].OnDemand))
	}
	return out, nil
}

// DescribeSpotPriceHistory reports the catalog's regional average spot price in every zone.
func (c *Cloud) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	out := &ec2.DescribeSpotPriceHistoryOutput{}
	now := time.Now()
	for _, t := range c.types {
		for _, z := range c.zones {
			price, ok := c.Price(Pool{InstanceType: t.Name, Zone: z, CapacityType: karpv1.CapacityTypeSpot})
			if !ok {
				continue
			}
			out.SpotPriceHistory = append(out.SpotPriceHistory, ec2types.SpotPrice{
				InstanceType: ec2types.InstanceType(t.Name), AvailabilityZone: aws.String(z),
				SpotPrice: aws.String(strconv.FormatFloat(price, 'f', -1, 64)), Timestamp: aws.Time(now),
				ProductDescription: ec2types.RIProductDescriptionLinuxUnixAmazonVpc,
			})
		}
	}
	return out, nil
}
