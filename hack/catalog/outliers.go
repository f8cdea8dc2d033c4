package main

import (
	"fmt"
	"math"
	"sort"
)

// The outlier rule, as internal/catalog's SpotOutliers applies it (a test there checks
// this header against it): a family's spot discount is the median over its sizes of
// 1 - spot average / on-demand; it is an outlier when it departs from the median of its
// category's family discounts by more than outlierZ x 1.4826 x their median absolute
// deviation and by more than outlierMinGap, in categories of at least outlierMinFamilies
// families.
const (
	outlierZ           = 3.5
	outlierMinGap      = 0.10
	outlierMinFamilies = 5
)

type outlier struct {
	family, category    string
	types               int
	discount, catMedian float64
	z                   float64
}

func (o outlier) String() string {
	return fmt.Sprintf("%s (%d types): spot discount %.0f%% against category %s's median of %.0f%% (z %s)",
		o.family, o.types, 100*o.discount, o.category, 100*o.catMedian, zText(o.z))
}

func spotOutliers(types map[string]facts, prices map[string]price) []outlier {
	byFamily := map[string][]float64{}
	category := map[string]string{}
	for name, p := range prices {
		t, ok := types[name]
		// The figures as written (and read back by internal/catalog): rounded by num.
		od, spot := round6(p.onDemand), round6(p.spotAvg)
		if !ok || spot <= 0 || od <= 0 || 1-spot/od <= 0 {
			continue
		}
		byFamily[t.family] = append(byFamily[t.family], 1-spot/od)
		category[t.family] = t.category
	}
	families := map[string][]string{}
	discount := map[string]float64{}
	for f, ds := range byFamily {
		discount[f] = median(ds)
		families[category[f]] = append(families[category[f]], f)
	}
	var out []outlier
	for cat, fams := range families {
		if len(fams) < outlierMinFamilies {
			continue
		}
		ds := make([]float64, len(fams))
		for i, f := range fams {
			ds[i] = discount[f]
		}
		med := median(ds)
		for i := range ds {
			ds[i] = math.Abs(ds[i] - med)
		}
		spread := 1.4826 * median(ds)
		if spread == 0 {
			continue
		}
		for _, f := range fams {
			if z := (discount[f] - med) / spread; math.Abs(z) > outlierZ && math.Abs(discount[f]-med) > outlierMinGap {
				out = append(out, outlier{family: f, category: cat, types: len(byFamily[f]), discount: discount[f], catMedian: med, z: z})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].family < out[j].family })
	return out
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// zText prints a modified z-score; a category whose discounts are nearly all alike gives
// huge ones, which say no more than "far out".
func zText(z float64) string {
	switch {
	case z >= 100:
		return ">+99"
	case z <= -100:
		return "<-99"
	}
	return fmt.Sprintf("%+.1f", z)
}
