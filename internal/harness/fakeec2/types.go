package fakeec2

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// instanceTypeInfo describes a catalog type the way DescribeInstanceTypes does. What the
// catalog does not know (ENI limits, processor maker, clock speed) is filled with
// plausible values by size; pod capacity in the suite comes from kubelet.maxPods.
func instanceTypeInfo(t *catalog.InstanceType, p catalog.Price) ec2types.InstanceTypeInfo {
	usage := []ec2types.UsageClassType{karpv1.CapacityTypeOnDemand}
	if p.SpotAvg > 0 {
		usage = append(usage, karpv1.CapacityTypeSpot)
	}
	arch, maker := ec2types.ArchitectureTypeX8664, "Intel"
	switch {
	case t.Arch == "arm64":
		arch, maker = ec2types.ArchitectureTypeArm64, "AWS"
	case amd(t.Family):
		maker = "AMD"
	}
	enis, ips := networkBySize(t.VCPU)
	metal := t.Size == "metal" || strings.HasPrefix(t.Size, "metal-")
	info := ec2types.InstanceTypeInfo{
		InstanceType:                  ec2types.InstanceType(t.Name),
		SupportedUsageClasses:         usage,
		SupportedVirtualizationTypes:  []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm},
		BurstablePerformanceSupported: aws.Bool(t.Burstable),
		BareMetal:                     aws.Bool(metal),
		CurrentGeneration:             aws.Bool(true),
		ProcessorInfo: &ec2types.ProcessorInfo{
			Manufacturer:             aws.String(maker),
			SupportedArchitectures:   []ec2types.ArchitectureType{arch},
			SustainedClockSpeedInGhz: aws.Float64(3.0),
		},
		VCpuInfo:   &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(int32(t.VCPU)), DefaultCores: aws.Int32(int32(max(1, t.VCPU/2)))},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(t.MemoryMiB)},
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces:     aws.Int32(enis),
			Ipv4AddressesPerInterface:    aws.Int32(ips),
			EncryptionInTransitSupported: aws.Bool(false),
			DefaultNetworkCardIndex:      aws.Int32(0),
			NetworkCards:                 []ec2types.NetworkCardInfo{{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(enis)}},
		},
	}
	if !metal {
		info.Hypervisor = ec2types.InstanceTypeHypervisorNitro
	}
	if t.GPUs > 0 {
		info.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{
			Name:         aws.String(strings.ToUpper(t.GPUName)),
			Manufacturer: aws.String(strings.ToUpper(t.GPUMaker)),
			Count:        aws.Int32(int32(t.GPUs)),
			MemoryInfo:   &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(int32(t.GPUMemoryMiB / int64(t.GPUs)))},
		}}}
	}
	return info
}

// networkBySize approximates EC2's ENI limits, which grow with the instance's size.
func networkBySize(vcpu int) (enis, ipsPerENI int32) {
	switch {
	case vcpu <= 2:
		return 3, 10
	case vcpu <= 8:
		return 4, 15
	case vcpu <= 32:
		return 8, 30
	default:
		return 15, 50
	}
}

// amd says whether a family's attributes (the letters after its generation) name AMD,
// as in c6a, m7a or r6an.
func amd(family string) bool {
	rest := strings.TrimLeft(family, "abcdefghijklmnopqrstuvwxyz")
	return len(rest) > 1 && strings.Contains(rest[1:], "a")
}
