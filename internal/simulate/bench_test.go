package simulate_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/simulate"
)

// generalOnly renders only the sample general class, with consistency c.
func generalOnly(b *testing.B, c v1alpha1.Consistency) []*karpv1.NodePool {
	var pools []*karpv1.NodePool
	for _, np := range samplePools(b, func(wc *v1alpha1.WorkloadClass) {
		if wc.Name == "general" {
			wc.Spec.Consistency = c
		}
	}) {
		if np.Labels[v1alpha1.LabelClass] == "general" {
			pools = append(pools, np)
		}
	}
	return pools
}

func karpenterExample(b *testing.B) []*karpv1.NodePool {
	objs, err := manifest.Load([]string{"../../config/samples/compare/karpenter-general-purpose.yaml"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	np := &karpv1.NodePool{}
	if err := objs[0].Into(np); err != nil {
		b.Fatal(err)
	}
	return []*karpv1.NodePool{np}
}

func mixed() []*corev1.Pod {
	var out []*corev1.Pod
	out = append(out, pods(10, "api", "500m", spread)...)
	out = append(out, pods(10, "worker", "2", spread)...)
	return append(out, pods(10, "batch", "4")...)
}

var printOnce sync.Once

// BenchmarkNodeSalad runs a 5-replica zone-spread Deployment and a 30-replica mixed
// workload against Karpenter's documented single diverse NodePool and the sample general
// class under each consistency, and prints distinct instance types, families and cost.
func BenchmarkNodeSalad(b *testing.B) {
	setups := []struct {
		name  string
		pools func(*testing.B) []*karpv1.NodePool
	}{
		{"karpenter-example", karpenterExample},
		{"poolsmith-diverse", func(b *testing.B) []*karpv1.NodePool { return generalOnly(b, v1alpha1.ConsistencyDiverse) }},
		{"poolsmith-family", func(b *testing.B) []*karpv1.NodePool { return generalOnly(b, v1alpha1.ConsistencyFamily) }},
		{"poolsmith-type", func(b *testing.B) []*karpv1.NodePool { return generalOnly(b, v1alpha1.ConsistencyType) }},
	}
	workloads := []struct {
		name string
		pods []*corev1.Pod
	}{{"spread-5", pods(5, "web", "1500m", spread)}, {"mixed-30", mixed()}}
	type row struct {
		workload, setup string
		res             *simulate.Result
	}
	var rows []row
	var mu sync.Mutex
	for _, w := range workloads {
		for _, s := range setups {
			b.Run(w.name+"/"+s.name, func(b *testing.B) {
				pools := s.pools(b)
				var res *simulate.Result
				for b.Loop() {
					var err error
					res, err = simulate.Run(context.Background(), pools, w.pods, simulate.Options{Region: "us-east-1", Zones: zones})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(res.Totals.InstanceTypes), "types")
				b.ReportMetric(float64(res.Totals.Families), "families")
				b.ReportMetric(res.Totals.CostPerHour, "$/h")
				mu.Lock()
				rows = append(rows, row{w.name, s.name, res})
				mu.Unlock()
			})
		}
	}
	printOnce.Do(func() {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKLOAD\tSETUP\tNODES\tTYPES\tFAMILIES\t$/HOUR\tSCHEDULER TIME\tUNSCHEDULABLE")
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r.workload+r.setup] {
				continue
			}
			seen[r.workload+r.setup] = true
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.4f\t%s\t%d\n", r.workload, r.setup, r.res.Totals.Nodes, r.res.Totals.InstanceTypes,
				r.res.Totals.Families, r.res.Totals.CostPerHour, r.res.Totals.SimulationTime.Round(100000), len(r.res.Unschedulable))
		}
		_ = tw.Flush()
	})
}
