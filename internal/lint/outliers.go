package lint

import (
	"fmt"
	"slices"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/render"
)

// OutlierImpact is what a class's spot outliers do to its ladder.
type OutlierImpact struct {
	// Outliers are the outlier families some spot rung of the class allows.
	Outliers []catalog.Outlier `json:"outliers"`
	// Allowing are the spot rungs that allow them, in ladder order.
	Allowing []string `json:"allowing"`
	// Decided are the rungs whose weight (or existence) changes when the outliers are put
	// at their category's median discount, as "name weight->weight".
	Decided []string `json:"decided,omitempty"`
}

// Outliers says which of the catalog's spot outliers a cost-weighted class's spot rungs
// allow and which rungs' ranking they decide: the class is rendered again with the
// outliers at their category's median discount, and the weights compared. ok is false
// when the class is not cost-weighted or no spot rung allows an outlier.
func Outliers(c Class, opts render.Options, outliers []catalog.Outlier) (OutlierImpact, bool) {
	var impact OutlierImpact
	if c.Result == nil || !c.Result.CostBased || len(outliers) == 0 {
		return impact, false
	}
	cat, region := priced(opts)
	for _, o := range outliers {
		found := false
		for i, np := range c.Result.NodePools {
			if c.Result.Rungs[i].CapacityType != v1alpha1.CapacityTypeSpot || !allowsAny(np, cat, o.Types) {
				continue
			}
			found = true
			if !slices.Contains(impact.Allowing, np.Name) {
				impact.Allowing = append(impact.Allowing, np.Name)
			}
		}
		if found {
			impact.Outliers = append(impact.Outliers, o)
		}
	}
	if len(impact.Outliers) == 0 {
		return impact, false
	}
	opts.Catalog, opts.Region = cat.WithoutOutliers(region, outliers), region
	again, err := render.Render(c.Baseline, c.Class, opts)
	if err != nil {
		impact.Decided = []string{fmt.Sprintf("(without them the class does not render: %v)", err)}
		return impact, true
	}
	weights := map[string]int32{}
	for _, r := range again.Rungs {
		weights[r.Name] = r.Weight
	}
	seen := map[string]bool{}
	for _, r := range c.Result.Rungs {
		seen[r.Name] = true
		switch w, ok := weights[r.Name]; {
		case !ok:
			impact.Decided = append(impact.Decided, fmt.Sprintf("%s %d->not rendered", r.Name, r.Weight))
		case w != r.Weight:
			impact.Decided = append(impact.Decided, fmt.Sprintf("%s %d->%d", r.Name, r.Weight, w))
		}
	}
	for _, r := range again.Rungs {
		if !seen[r.Name] {
			impact.Decided = append(impact.Decided, fmt.Sprintf("%s not rendered->%d", r.Name, r.Weight))
		}
	}
	return impact, true
}

// priced is the catalog and region the options price with.
func priced(opts render.Options) (*catalog.Catalog, string) {
	cat, region := opts.Catalog, opts.Region
	if cat == nil {
		cat, _ = catalog.Load()
	}
	if region == "" {
		region = catalog.DefaultRegion
	}
	return cat, region
}

func allowsAny(np *karpv1.NodePool, cat *catalog.Catalog, types []string) bool {
	m := catalog.NewMatcher(np.Spec.Template.Spec.Requirements)
	for _, name := range types {
		if t := cat.Types[name]; t != nil && m.Matches(t) {
			return true
		}
	}
	return false
}

// checkOutliers reports a cost-weighted class whose spot rungs allow outlier families: a
// warning when they decide the ranking, else a note.
func checkOutliers(c Class, opts render.Options, outliers []catalog.Outlier, add adder) {
	impact, ok := Outliers(c, opts, outliers)
	if !ok {
		return
	}
	names := make([]string, len(impact.Outliers))
	for i, o := range impact.Outliers {
		names[i] = o.String()
	}
	what := fmt.Sprintf("spot rungs %s allow types whose spot discount departs from their category's (%s)",
		strings.Join(impact.Allowing, ", "), strings.Join(names, "; "))
	if len(impact.Decided) == 0 {
		add(Info, "WorkloadClass/"+c.Class.Name, CheckSpotOutlier, "%s; with them at their category's median discount no weight changes", what)
		return
	}
	add(Warning, "WorkloadClass/"+c.Class.Name, CheckSpotOutlier,
		"%s, and they decide the ranking: with them at their category's median discount the weights would be %s; check those prices (--signals gives current ones) or use weighting.strategy Static",
		what, strings.Join(impact.Decided, ", "))
}
