// Package classgen generates WorkloadClass documents for the end-to-end checks that
// whatever admission accepts renders to objects Karpenter's CRDs accept. Most fields are
// drawn from ordinary values; a good share from borderline ones that once got through
// (negative and overflowing quantities, requirements Karpenter refuses, names that
// shorten badly, odd durations, reserved tags and labels, kubelet and block-device
// values). It is deterministic for a seed.
package classgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Generator draws classes from a seeded source.
type Generator struct {
	r *rand.Rand
	n int
}

// New returns a generator for seed.
func New(seed uint64) *Generator {
	return &Generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *Generator) pick(options ...any) any { return options[g.r.IntN(len(options))] }

// borderline is the share of values drawn from the borderline ones.
const borderline = 0.12

// either picks from ordinary values, or now and then from borderline ones.
func (g *Generator) either(ordinary []any, odd ...any) any {
	if g.chance(borderline) {
		return g.pick(odd...)
	}
	return g.pick(ordinary...)
}

func (g *Generator) chance(p float64) bool { return g.r.Float64() < p }

func (g *Generator) subset(options ...string) []any {
	var out []any
	for _, o := range options {
		if g.chance(0.5) {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		out = append(out, options[g.r.IntN(len(options))])
	}
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// name is a class name: mostly short, sometimes 54 to 64 characters, sometimes with dots
// where the 54-character cut falls.
func (g *Generator) name() string {
	g.n++
	base := fmt.Sprintf("gen-%d", g.n)
	if !g.chance(borderline * 2) {
		return base
	}
	switch g.r.IntN(4) {
	case 0:
		return base + "." + strings.Repeat("a", 53-len(base)-1) + ".x" // '.' at index 53
	case 1:
		return base + strings.Repeat("b", 63-len(base)) // 63: the longest valid
	case 2:
		return base + strings.Repeat("c", 64-len(base)) // one too long
	case 3:
		return "Gen." + base // upper case: refused
	}
	return base
}

var oddRequirements = []map[string]any{
	{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": []any{"-1"}},
	{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": []any{"abc"}},
	{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": []any{"1", "2"}},
	{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": []any{}},
	{"key": "karpenter.sh/nodepool", "operator": "In", "values": []any{"x"}},
	{"key": "kubernetes.io/hostname", "operator": "In", "values": []any{"node-1"}},
	{"key": "example.com/team", "operator": "In", "values": []any{"a", "b"}, "minValues": int64(3)},
}

var requirements = []map[string]any{
	{"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": []any{"5"}},
	{"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "In", "values": []any{"nitro"}},
	{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": []any{"65"}},
	{"key": "example.com/team", "operator": "Exists"},
	{"key": "karpenter.k8s.aws/instance-memory", "operator": "Gte", "values": []any{"2048"}},
	{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": []any{"us-east-1e"}},
}

func (g *Generator) quantity() any {
	return g.either([]any{"512Mi", "4Gi", "16Gi", "64Gi", "1Ti"}, "1Ki", "10Pi", "4194305Gi", "-8Gi", "0", "1e3", "9223372036854775807")
}

func (g *Generator) count() any {
	return g.either([]any{int64(1), int64(2), int64(4), int64(8), int64(16), int64(64)}, int64(-1), int64(0), int64(4096), int64(2147483647))
}

func (g *Generator) duration() any {
	return g.either([]any{"1h", "30m", "720h", "Never", "24h", "5m"}, "0s", "1d", "-1h", "99999999h", "2562048h")
}

// Class returns one WorkloadClass document on the Baseline named baseline.
func (g *Generator) Class(baseline string) map[string]any {
	spec := map[string]any{"baselineRef": map[string]any{"name": baseline}}
	set := func(p float64, key string, v func() any) {
		if g.chance(p) {
			spec[key] = v()
		}
	}
	set(0.7, "profile", func() any { return g.pick("General", "BurstableCI", "GPU", "MemoryOptimized", "Custom") })
	set(0.6, "architectures", func() any { return g.subset("arm64", "amd64") })
	set(0.6, "capacityTypes", func() any { return g.subset("spot", "on-demand", "reserved") })
	set(0.3, "requirements", func() any {
		var out []any
		for range 1 + g.r.IntN(2) {
			if g.chance(borderline * 3) {
				out = append(out, oddRequirements[g.r.IntN(len(oddRequirements))])
			} else {
				out = append(out, requirements[g.r.IntN(len(requirements))])
			}
		}
		return out
	})
	set(0.2, "zones", func() any { return g.subset("us-east-1a", "us-east-1b", "us-east-1c") })
	set(0.6, "instances", func() any {
		in := map[string]any{}
		if g.chance(0.4) {
			in["categories"] = g.subset("c", "m", "r", "t")
		}
		if g.chance(0.3) {
			in["families"] = []any{g.either([]any{"m7i", "c7g", "r6g", "m7i-flex", "c6i"}, "m7-", "x", "M7i")}
		}
		if g.chance(0.2) {
			in["excludeFamilies"] = g.subset("t2", "m4")
		}
		if g.chance(0.15) {
			in["types"] = g.subset("m7i.large", "c7g.xlarge", "g6.xlarge")
		}
		if g.chance(0.3) {
			in["minGeneration"] = g.count()
		}
		if g.chance(0.4) {
			in["cpu"] = map[string]any{"min": g.count(), "max": g.count()}
		}
		if g.chance(0.4) {
			in["memory"] = map[string]any{"min": g.quantity(), "max": g.quantity()}
		}
		if g.chance(0.1) {
			in["gpu"] = map[string]any{"count": map[string]any{"min": g.count()}, "manufacturer": g.pick("nvidia", "aws", "amd")}
		}
		return in
	})
	set(0.3, "consistency", func() any { return g.pick("Diverse", "Family", "Type") })
	set(0.3, "labels", func() any {
		return map[string]any{g.either([]any{"example.com/team", "team"}, "poolsmith.dev/rung", "poolsmith.dev/class", "karpenter.sh/foo", "kubernetes.io/hostname", "karpenter.k8s.aws/x").(string): g.either([]any{"a", "x.y"}, "", "-a")}
	})
	set(0.2, "annotations", func() any { return map[string]any{"example.com/note": "n"} })
	set(0.3, "taints", func() any {
		return []any{map[string]any{"key": g.either([]any{"dedicated", "nvidia.com/gpu"}, "karpenter.sh/disrupted", "node.kubernetes.io/not-ready"), "value": "x", "effect": g.pick("NoSchedule", "NoExecute", "PreferNoSchedule")}}
	})
	set(0.1, "startupTaints", func() any {
		return []any{map[string]any{"key": "startup", "effect": "NoSchedule"}}
	})
	set(0.3, "limits", func() any {
		return map[string]any{"cpu": g.either([]any{"1000", "64", "0.5", "512"}, "-5", "0", "1e9"), "memory": g.quantity()}
	})
	set(0.3, "disruption", func() any {
		d := map[string]any{"consolidateAfter": g.duration()}
		if g.chance(0.5) {
			d["consolidationPolicy"] = g.pick("WhenEmpty", "WhenEmptyOrUnderutilized")
		}
		if g.chance(0.4) {
			b := map[string]any{"nodes": g.either([]any{"10%", "5", "100%"}, "0", "0%")}
			if g.chance(0.3) {
				b["schedule"], b["duration"] = "0 9 * * mon-fri", g.pick("8h", "1h30m")
			}
			d["budgets"] = []any{b}
		}
		return d
	})
	set(0.2, "expireAfter", g.duration)
	set(0.2, "fallbackExpireAfter", g.duration)
	set(0.2, "terminationGracePeriod", func() any { return g.pick("1h", "24h", "0s", "90m") })
	set(0.3, "weighting", func() any {
		w := map[string]any{"strategy": g.pick("Static", "Cost", "RiskAdjustedCost")}
		if g.chance(0.5) {
			w["ceiling"] = g.pick(int64(1), int64(5), int64(20), int64(60), int64(100))
		}
		return w
	})
	set(0.2, "prunePolicy", func() any { return g.pick("Delete", "Retire", "Orphan") })
	set(0.4, "nodeClass", func() any {
		nc := map[string]any{}
		if g.chance(0.4) {
			nc["tags"] = map[string]any{g.either([]any{"team", "app"}, "kubernetes.io/cluster/prod", "karpenter.sh/nodepool", "eks:eks-cluster-name", "karpenter.k8s.aws/ec2nodeclass").(string): "x"}
		}
		if g.chance(0.4) {
			nc["kubelet"] = map[string]any{g.pick("maxPods", "podsPerCore", "imageGCHighThresholdPercent").(string): g.either([]any{int64(110), int64(50), int64(80)}, int64(-1), int64(0), int64(250), "x")}
		}
		if g.chance(0.3) {
			nc["blockDeviceMappings"] = []any{map[string]any{"deviceName": g.pick("/dev/xvda", "/dev/xvdb"), "ebs": map[string]any{
				"volumeSize": g.either([]any{"20Gi", "100Gi", "500Gi"}, "0", "64Ti", "-1Gi"), "volumeType": g.pick("gp3", "io2", "st1"),
			}}}
		}
		if g.chance(0.1) {
			nc["detailedMonitoring"] = true
		}
		return nc
	})
	return map[string]any{
		"apiVersion": "poolsmith.dev/v1alpha1",
		"kind":       "WorkloadClass",
		"metadata":   map[string]any{"name": g.name()},
		"spec":       spec,
	}
}
