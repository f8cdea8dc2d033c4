package catalog

import (
	"fmt"
	"math"
	"sort"
)

// The outlier rule. A family's spot discount is the median, over its spot-priced sizes in
// the region, of 1 - spot average / on-demand. Within a category (c, m, r, ...) each family
// is one vote, so a family with many sizes cannot make its own figure the norm. A family
// is an outlier when its discount departs from the median of its category's family
// discounts by more than OutlierZ robust standard deviations (1.4826 x the median
// absolute deviation: the modified z-score cut-off of Iglewicz and Hoaglin) and by more
// than OutlierMinGap, so a category whose discounts are nearly all alike (eu-west-1's
// snapshot puts most c families at 54-55%) does not flag a one-point difference. In the
// 2025-05-28 snapshot (us-east-1) it flags c8gd, m8gd and r8gd (89% against medians of
// 63-66%) and, on the low side, m5ad and r5b.
const (
	OutlierZ = 3.5
	// OutlierMinGap is the least departure, in discount (0..1), that counts.
	OutlierMinGap = 0.10
	// OutlierMinFamilies: a category with fewer spot-priced families has no distribution
	// to depart from.
	OutlierMinFamilies = 5
)

// Outlier is a family whose spot discount departs from its category's.
type Outlier struct {
	Family   string `json:"family"`
	Category string `json:"category"`
	// Types are the family's spot-priced types in the region, sorted.
	Types []string `json:"types"`
	// Discount is the family's median spot discount, 0..1.
	Discount float64 `json:"discount"`
	// CategoryMedian is the median of the category's family discounts.
	CategoryMedian float64 `json:"categoryMedian"`
	// Z is the modified z-score: positive when spot is unusually cheap.
	Z float64 `json:"z"`
}

// String is the outlier in one line, as the catalog's header records it.
func (o Outlier) String() string {
	return fmt.Sprintf("%s (%d types): spot discount %.0f%% against category %s's median of %.0f%% (z %s)",
		o.Family, len(o.Types), 100*o.Discount, o.Category, 100*o.CategoryMedian, zText(o.Z))
}

// SpotOutliers lists the families of region whose spot discount departs from their
// category's by more than the outlier rule allows, by family name.
func (c *Catalog) SpotOutliers(region string) []Outlier {
	byFamily := map[string][]float64{}
	types := map[string][]string{}
	category := map[string]string{}
	for name, p := range c.Prices[region] {
		t := c.Types[name]
		if t == nil || t.PriceOnly || p.Discount() <= 0 {
			continue
		}
		byFamily[t.Family] = append(byFamily[t.Family], p.Discount())
		types[t.Family] = append(types[t.Family], name)
		category[t.Family] = t.Category
	}
	families := map[string][]string{} // category -> families
	discount := map[string]float64{}
	for f, ds := range byFamily {
		discount[f] = median(ds)
		families[category[f]] = append(families[category[f]], f)
	}
	var out []Outlier
	for cat, fams := range families {
		if len(fams) < OutlierMinFamilies {
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
			if z := (discount[f] - med) / spread; math.Abs(z) > OutlierZ && math.Abs(discount[f]-med) > OutlierMinGap {
				sort.Strings(types[f])
				out = append(out, Outlier{Family: f, Category: cat, Types: types[f], Discount: discount[f], CategoryMedian: med, Z: z})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Family < out[j].Family })
	return out
}

// WithoutOutliers returns the catalog with each outlier family's spot prices in region
// set to on-demand x (1 - its category's median discount), the source naming the
// correction: what the ranking would be if the outliers were ordinary. c is not changed.
func (c *Catalog) WithoutOutliers(region string, outliers []Outlier) *Catalog {
	fix := map[string]Outlier{}
	for _, o := range outliers {
		fix[o.Family] = o
	}
	out := &Catalog{Types: c.Types, Prices: map[string]map[string]Price{}, Dates: c.Dates}
	for r, prices := range c.Prices {
		out.Prices[r] = prices
	}
	corrected := make(map[string]Price, len(c.Prices[region]))
	for name, p := range c.Prices[region] {
		if t := c.Types[name]; t != nil && p.SpotAvg > 0 {
			if o, ok := fix[t.Family]; ok {
				p.SpotMin = p.OnDemand * (1 - o.CategoryMedian)
				p.SpotAvg = p.SpotMin
				p.SpotSource = "category " + o.Category + " median discount"
			}
		}
		corrected[name] = p
	}
	out.Prices[region] = corrected
	return out
}

// median of v; v is reordered.
func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// ZText is the z-score as String prints it.
func (o Outlier) ZText() string { return zText(o.Z) }

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
