package headroom

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// ResourceGPU is the GPU resource a unit's gpu field requests.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Shape is a HeadroomPodShape as requests.
func Shape(s *v1alpha1.HeadroomPodShape) corev1.ResourceList {
	if s == nil {
		return nil
	}
	out := corev1.ResourceList{}
	if s.CPU != nil {
		out[corev1.ResourceCPU] = s.CPU.DeepCopy()
	}
	if s.Memory != nil {
		out[corev1.ResourceMemory] = s.Memory.DeepCopy()
	}
	if s.GPU != nil {
		out[ResourceGPU] = *resource.NewQuantity(int64(*s.GPU), resource.DecimalSI)
	}
	for k, v := range s.ExtendedResources {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[corev1.ResourceName(k)] = q
		}
	}
	return out
}

// FromPodShape is weighting.podShape as a headroom unit.
func FromPodShape(s *v1alpha1.PodShape) *v1alpha1.HeadroomPodShape {
	if s == nil {
		return nil
	}
	return &v1alpha1.HeadroomPodShape{CPU: s.CPU, Memory: s.Memory, GPU: s.GPU}
}

// Allocatable is what a type offers pods under Karpenter's overhead model (the catalog's:
// kube-reserved CPU and memory, the hard eviction threshold): millicores and bytes.
func Allocatable(t *catalog.InstanceType) (milliCPU float64, memBytes float64) {
	milliCPU = float64(t.VCPU)*1000 - catalog.KubeReservedMilliCPU(t.VCPU)
	memBytes = float64(t.MemoryMiB-catalog.KubeReservedMemoryMiB(catalog.MaxPods)-catalog.EvictionMemoryMiB) * (1 << 20)
	return milliCPU, memBytes
}

// UnitsOf is how many units fit on one node of type t after Karpenter's overhead, at most
// catalog.MaxPods; 0 when none does, or when the shape names none of cpu, memory and GPUs
// (extended resources are not in the catalog and are not judged).
func UnitsOf(t *catalog.InstanceType, shape corev1.ResourceList) float64 {
	cpu, mem := Allocatable(t)
	fit := math.Inf(1)
	if q, ok := shape[corev1.ResourceCPU]; ok && q.MilliValue() > 0 {
		fit = math.Min(fit, math.Floor(cpu/float64(q.MilliValue())))
	}
	if q, ok := shape[corev1.ResourceMemory]; ok && q.Value() > 0 {
		fit = math.Min(fit, math.Floor(mem/float64(q.Value())))
	}
	if q, ok := shape[ResourceGPU]; ok && q.Value() > 0 {
		fit = math.Min(fit, math.Floor(float64(t.GPUs)/float64(q.Value())))
	}
	if math.IsInf(fit, 1) || fit < 1 {
		return 0
	}
	return math.Min(fit, catalog.MaxPods)
}

// TypicalPod is the unit of a class that names no shape: half the allocatable of the
// smallest of types (by vCPU, then memory, then name), rounded down to 50m and 64Mi, so
// two units fill the class's smallest preferred node and leave room for DaemonSets the
// catalog cannot know. With gpu it is one GPU and half the allocatable per GPU of the
// smallest type that has GPUs. from names the type; ok is false when types hold none.
func TypicalPod(types []*catalog.InstanceType, gpu bool) (shape corev1.ResourceList, from string, ok bool) {
	cands := make([]*catalog.InstanceType, 0, len(types))
	for _, t := range types {
		if t.PriceOnly || t.VCPU == 0 || (gpu && t.GPUs == 0) {
			continue
		}
		cands = append(cands, t)
	}
	if len(cands) == 0 {
		return nil, "", false
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.VCPU != b.VCPU {
			return a.VCPU < b.VCPU
		}
		if a.MemoryMiB != b.MemoryMiB {
			return a.MemoryMiB < b.MemoryMiB
		}
		return a.Name < b.Name
	})
	t := cands[0]
	cpu, mem := Allocatable(t)
	per := 2.0
	shape = corev1.ResourceList{}
	if gpu {
		per = 2 * float64(t.GPUs)
		shape[ResourceGPU] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	const cpuStep, memStep = 50, 64 << 20
	milli := int64(cpu/per) / cpuStep * cpuStep
	bytes := int64(mem/per) / memStep * memStep
	if milli < cpuStep || bytes < memStep {
		return nil, t.Name, false
	}
	shape[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
	shape[corev1.ResourceMemory] = *resource.NewQuantity(bytes, resource.BinarySI)
	return shape, t.Name, true
}
