package render_test

import (
	"fmt"
	"testing"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
)

// BenchmarkRender1000Classes renders 1,000 classes (250 of each sample) per iteration and
// reports rungs per second alongside ns/op and allocations.
func BenchmarkRender1000Classes(b *testing.B) {
	samples, base := goldenInputs(b)
	var classes []*v1alpha1.WorkloadClass
	for i := 0; len(classes) < 1000; i++ {
		for _, name := range []string{"sample-general", "sample-ci", "sample-gpu", "sample-analytics"} {
			wc := samples[name].DeepCopy()
			wc.Name = fmt.Sprintf("%s-%d", wc.Name, i)
			classes = append(classes, wc)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	rungs := 0
	for n := 0; n < b.N; n++ {
		for _, wc := range classes {
			res, err := render.Render(base, wc, render.Options{})
			if err != nil {
				b.Fatal(err)
			}
			rungs += len(res.NodePools)
		}
	}
	b.ReportMetric(float64(rungs)/b.Elapsed().Seconds(), "rungs/s")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/1000classes")
}
