package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// ProfileDefaults are the values a profile contributes between the Baseline and the
// class. Unset fields leave the lower layer's value.
type ProfileDefaults struct {
	Architectures []v1alpha1.Architecture
	CapacityTypes []v1alpha1.CapacityType
	// Categories and MinGeneration apply only when the class names no families or types:
	// an explicit family or type is more specific than the profile's broad shape.
	Categories    []string
	MinGeneration *int32
	GPUCount      *v1alpha1.IntRange
	GPUMaker      string
	// Taints; ClassTaint adds poolsmith.dev/class=<class name>:NoSchedule.
	Taints     []v1alpha1.Taint
	ClassTaint bool

	ConsolidationPolicy karpv1.ConsolidationPolicy
	ConsolidateAfter    string
	ExpireAfter         string
	FallbackExpireAfter string
	// MinRootVolume raises the root volume to at least this size.
	MinRootVolume *resource.Quantity
	// Strategy is the profile's weighting strategy when the class sets none; empty means
	// RiskAdjustedCost.
	Strategy v1alpha1.WeightingStrategy
}

// OS is the operating system every profile targets (kubernetes.io/os).
const OS = "linux"

// GPUTaintKey is the taint the GPU profile sets so that only pods that ask for GPUs land
// on GPU nodes.
const GPUTaintKey = "nvidia.com/gpu"

// Profiles documents every profile's defaults; the profile table in docs/concepts.md mirrors it.
//
//	profile          arch          capacity         shape                        disruption                 lifetime
//	General          arm64, amd64  spot, on-demand  c/m/r, generation >= 6       WhenEmptyOrUnderutilized 1m  720h, fallback 24h
//	BurstableCI      amd64, arm64  spot, on-demand  c/m/t, generation >= 3       WhenEmptyOrUnderutilized 30s 24h, fallback 4h; class taint
//	GPU              amd64         on-demand, spot  g/p, nvidia, 1+ GPUs         WhenEmpty 10m              720h, no fallback; nvidia.com/gpu taint; root >= 100Gi; Static weights
//	MemoryOptimized  amd64, arm64  on-demand, spot  r/x, generation >= 5         WhenEmpty 5m               720h, fallback 48h
var Profiles = map[v1alpha1.Profile]ProfileDefaults{
	v1alpha1.ProfileGeneral: {
		Architectures:       []v1alpha1.Architecture{v1alpha1.ArchitectureARM64, v1alpha1.ArchitectureAMD64},
		CapacityTypes:       []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
		Categories:          []string{"c", "m", "r"},
		MinGeneration:       ptr.To[int32](6),
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
		ConsolidateAfter:    "1m",
		FallbackExpireAfter: "24h",
	},
	v1alpha1.ProfileBurstableCI: {
		// CI images are often built for amd64 only, so amd64 comes first.
		Architectures:       []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64, v1alpha1.ArchitectureARM64},
		CapacityTypes:       []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
		Categories:          []string{"c", "m", "t"},
		MinGeneration:       ptr.To[int32](3),
		ClassTaint:          true,
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
		ConsolidateAfter:    "30s",
		ExpireAfter:         "24h",
		FallbackExpireAfter: "4h",
	},
	v1alpha1.ProfileGPU: {
		Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64},
		// GPU capacity is scarce and jobs are long: on-demand first.
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeSpot},
		Categories:    []string{"g", "p"},
		GPUCount:      &v1alpha1.IntRange{Min: ptr.To[int32](1)},
		GPUMaker:      "nvidia",
		Taints:        []v1alpha1.Taint{{Key: GPUTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		// Never consolidate a busy GPU node; expiry is left at the lower layer's value and no
		// fallback expiry is set, because expiry ignores do-not-disrupt and would kill jobs.
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
		ConsolidateAfter:    "10m",
		MinRootVolume:       ptr.To(resource.MustParse("100Gi")),
		// Spot GPUs are so much cheaper that any cost ranking puts them first, whatever
		// their interruptions cost a long training job: the GPU profile keeps the class's
		// order (on-demand first) unless the class asks for a cost strategy.
		Strategy: v1alpha1.WeightingStatic,
	},
	// Custom adds nothing: not even kubernetes.io/os.
	v1alpha1.ProfileCustom: {},
	v1alpha1.ProfileMemoryOptimized: {
		Architectures:       []v1alpha1.Architecture{v1alpha1.ArchitectureAMD64, v1alpha1.ArchitectureARM64},
		CapacityTypes:       []v1alpha1.CapacityType{v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeSpot},
		Categories:          []string{"r", "x"},
		MinGeneration:       ptr.To[int32](5),
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
		ConsolidateAfter:    "5m",
		FallbackExpireAfter: "48h",
	},
}

// Karpenter's defaults, written out in every rendered object so none is hidden.
const (
	KarpenterDefaultExpireAfter      = "720h"
	KarpenterDefaultConsolidateAfter = "0s"
	KarpenterDefaultBudgetNodes      = "10%"
)

// KarpenterDefaultConsolidationPolicy is Karpenter's default consolidation policy.
const KarpenterDefaultConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
