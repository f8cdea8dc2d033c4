package catalog

// Karpenter's node overhead model, as the AWS provider computes it by default, for what
// the catalog does not know per type: kube-reserved CPU and memory and the hard eviction
// threshold. The catalog has no ENI limits, so every type is taken to run MaxPods pods.
const (
	// MaxPods is the pod count assumed for every type.
	MaxPods = 110
	// EvictionMemoryMiB is the kubelet's default memory.available hard eviction threshold.
	EvictionMemoryMiB = 100
)

// KubeReservedMilliCPU is kube-reserved CPU for n vCPUs: 6% of the first core, 1% of the
// second, 0.5% of the third and fourth and 0.25% of each one after.
func KubeReservedMilliCPU(n int) float64 {
	reserved := 0.0
	for core := 1; core <= n; core++ {
		switch {
		case core == 1:
			reserved += 60
		case core == 2:
			reserved += 10
		case core <= 4:
			reserved += 5
		default:
			reserved += 2.5
		}
	}
	return reserved
}

// KubeReservedMemoryMiB is kube-reserved memory: 255 MiB plus 11 MiB per pod.
func KubeReservedMemoryMiB(pods int) int64 {
	return 255 + 11*int64(pods)
}
