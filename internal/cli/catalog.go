package cli

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/lint"
)

// catalogRow is one type's facts and price in the chosen region, for one rung if a class
// was given.
type catalogRow struct {
	Rung string `json:"rung,omitempty"`
	*catalog.InstanceType
	Price *catalog.Price `json:"price,omitempty"`
	// HourlyPrice is what the rung would pay: spot average for spot rungs, on-demand
	// otherwise.
	HourlyPrice float64 `json:"hourlyPrice,omitempty"`
	PerVCPU     float64 `json:"pricePerVCPU,omitempty"`
	// Outlier is "high" or "low" when the type's family is a spot outlier in its category.
	Outlier string `json:"outlier,omitempty"`
	// Commitment is the first of the class's commitments (in AWS's order) that covers the
	// type on an on-demand rung, with --commitments.
	Commitment *committedPrice `json:"commitment,omitempty"`
}

// committedPrice is what a commitment charges for one instance of a type.
type committedPrice struct {
	ID string `json:"id"`
	// Rate is US dollars per hour of one instance, from RateSource.
	Rate       float64 `json:"rate"`
	RateSource string  `json:"rateSource"`
	// Discount is the rate's discount off on-demand, 0.31 for 31 %.
	Discount float64 `json:"discount"`
	// PerVCPU is the rate per vCPU-hour: the effective price weights rank covered rungs by.
	PerVCPU float64 `json:"effectivePerVCPU,omitempty"`
}

func newCatalogCommand() *cobra.Command {
	var flags inputFlags
	var class string
	var missing, outliers, commitments bool
	c := &cobra.Command{
		Use:   "catalog [--region R] [--signals FILE] [-f PATH --class NAME [--commitments]] [--missing-facts] [--outliers [-f PATH]]",
		Short: "List instance types from the embedded catalog, with prices and interruption buckets",
		Long: `List the embedded catalog's instance types with their facts and, for --region, their
on-demand and spot prices (USD per hour, Linux), where each price came from (the catalog
snapshot, the Spot Instance Advisor's savings with --signals, or a prices.json override),
the Spot Instance Advisor interruption bucket, and whether the type's family is a spot
outlier in its category. With -f and --class, list per rung the types the rung allows,
cheapest per vCPU first; with --commitments, each on-demand type a commitment of the
class's Baseline covers gets that commitment (the first in AWS's order), its rate, the
rate's discount off on-demand and its price per vCPU-hour, the effective price covered
rungs rank by (docs/commitments.md). --missing-facts lists the types known only by price (from
Karpenter's table). --outliers lists the families whose spot discount departs from their
category's, and with -f which classes' spot rungs allow them and whose ranking they decide.`,
		Example: `  poolsmith catalog --region eu-west-1
  poolsmith catalog -f config/samples/ --class gpu
  poolsmith catalog -f baseline-and-classes.yaml --class api --commitments
  poolsmith catalog --outliers -f config/samples/ --signals poolsmith-signals.yaml
  poolsmith catalog --missing-facts`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := flags.options(c.ErrOrStderr())
			if err != nil {
				return err
			}
			cat, region := opts.Catalog, flags.region
			if !slices.Contains(catalogOutputs, flags.output) {
				return usageError{fmt.Errorf("unknown output format %q (allowed: table, json)", flags.output)}
			}
			if _, ok := cat.Prices[region]; !ok {
				return usageError{fmt.Errorf("--region %s has no prices in the catalog (regions: %v)", region, cat.Regions())}
			}
			if outliers {
				return listOutliers(c, &flags, cat, region)
			}
			var rows []catalogRow
			switch {
			case missing:
				for _, name := range cat.MissingFacts() {
					p := cat.Prices["us-east-1"][name]
					rows = append(rows, catalogRow{InstanceType: cat.Types[name], Price: &p, HourlyPrice: p.OnDemand})
				}
			case commitments && class == "":
				return usageError{fmt.Errorf("--commitments needs -f and --class: the commitments are the class's Baseline's")}
			case class != "":
				if rows, err = classRows(c, &flags, cat, region, class, commitments); err != nil {
					return err
				}
			default:
				for _, t := range cat.Types {
					if p, ok := cat.Prices[region][t.Name]; ok && !t.PriceOnly {
						rows = append(rows, priced("", t, p, p.OnDemand))
					}
				}
				sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
			}
			markOutliers(rows, cat.SpotOutliers(region))
			return writeCatalog(c, rows, flags.output, commitments)
		},
	}
	flags.register(c, "table (default) or json")
	c.Flags().StringVar(&class, "class", "", "with -f: list the types each rung of this WorkloadClass allows")
	c.Flags().BoolVar(&missing, "missing-facts", false, "list the types known only by their us-east-1 price")
	c.Flags().BoolVar(&commitments, "commitments", false, "with -f and --class: the commitment covering each on-demand type, its rate, discount and effective price per vCPU-hour")
	c.Flags().BoolVar(&outliers, "outliers", false, "list the families whose spot discount is an outlier in their category; with -f, the rungs they rank")
	return c
}

// markOutliers marks the rows of outlier families.
func markOutliers(rows []catalogRow, outliers []catalog.Outlier) {
	dir := map[string]string{}
	for _, o := range outliers {
		dir[o.Family] = "high"
		if o.Z < 0 {
			dir[o.Family] = "low"
		}
	}
	for i := range rows {
		rows[i].Outlier = dir[rows[i].Family]
	}
}

// outlierReport is catalog --outliers' answer.
type outlierReport struct {
	Region   string            `json:"region"`
	Outliers []catalog.Outlier `json:"outliers"`
	// Classes are the cost-weighted classes whose spot rungs allow an outlier, by name.
	Classes map[string]lint.OutlierImpact `json:"classes,omitempty"`
}

// listOutliers prints the region's spot outliers and, for the classes in -f, which spot
// rungs allow them and whose ranking they decide.
func listOutliers(c *cobra.Command, flags *inputFlags, cat *catalog.Catalog, region string) error {
	report := outlierReport{Region: region, Outliers: cat.SpotOutliers(region)}
	if report.Outliers == nil {
		report.Outliers = []catalog.Outlier{}
	}
	if len(flags.files) > 0 {
		in, err := flags.load(c, catalogOutputs...)
		if err != nil {
			return err
		}
		report.Classes = map[string]lint.OutlierImpact{}
		for _, lc := range in.renderEach() {
			if impact, ok := lint.Outliers(lc, in.opts, report.Outliers); ok {
				report.Classes[lc.Class.Name] = impact
			}
		}
	}
	out := c.OutOrStdout()
	if flags.output == "json" {
		return writeJSON(out, report)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FAMILY\tCATEGORY\tTYPES\tSPOT-DISCOUNT\tCATEGORY-MEDIAN\tZ")
	for _, o := range report.Outliers {
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f%%\t%.0f%%\t%s\n", o.Family, o.Category, len(o.Types), 100*o.Discount, 100*o.CategoryMedian, o.ZText())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if report.Classes == nil {
		return nil
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CLASS\tOUTLIERS\tSPOT-RUNGS-ALLOWING\tDECIDES (weight with -> without)")
	for _, name := range slices.Sorted(maps.Keys(report.Classes)) {
		impact := report.Classes[name]
		fams := make([]string, len(impact.Outliers))
		for i, o := range impact.Outliers {
			fams[i] = o.Family
		}
		decides := "no weight"
		if len(impact.Decided) > 0 {
			decides = strings.Join(impact.Decided, ", ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, strings.Join(fams, ","), strings.Join(impact.Allowing, ","), decides)
	}
	return w.Flush()
}

// catalogOutputs are the output formats catalog accepts.
var catalogOutputs = []string{"", "table", "json"}

func priced(rung string, t *catalog.InstanceType, p catalog.Price, hourly float64) catalogRow {
	row := catalogRow{Rung: rung, InstanceType: t, Price: &p, HourlyPrice: hourly}
	if t.VCPU > 0 {
		row.PerVCPU = hourly / float64(t.VCPU)
	}
	return row
}

// classRows renders the class and lists, per rung, the priced types it allows.
func classRows(c *cobra.Command, flags *inputFlags, cat *catalog.Catalog, region, class string, commitments bool) ([]catalogRow, error) {
	results, err := flags.renderAll(c, catalogOutputs...)
	if err != nil {
		return nil, err
	}
	for _, res := range results {
		if res.Class != class {
			continue
		}
		var rows []catalogRow
		for i, np := range res.NodePools {
			spot := res.Rungs[i].CapacityType == v1alpha1.CapacityTypeSpot
			var rung []catalogRow
			for _, t := range cat.Types {
				p, ok := cat.Prices[region][t.Name]
				if !ok || !t.Matches(np.Spec.Template.Spec.Requirements) || (spot && p.SpotAvg == 0) {
					continue
				}
				hourly := p.OnDemand
				if spot {
					hourly = p.SpotAvg
				}
				row := priced(np.Name, t, p, hourly)
				if com, rate, source, ok := commitment.Covering(res.Settings.Commitments.Open, t, p.OnDemand, region); ok && commitments &&
					res.Rungs[i].CapacityType == v1alpha1.CapacityTypeOnDemand {
					row.Commitment = &committedPrice{ID: com.ID, Rate: rate, RateSource: source, Discount: 1 - rate/p.OnDemand}
					if t.VCPU > 0 {
						row.Commitment.PerVCPU = rate / float64(t.VCPU)
					}
				}
				rung = append(rung, row)
			}
			sort.Slice(rung, func(a, b int) bool {
				if rung[a].PerVCPU != rung[b].PerVCPU {
					return rung[a].PerVCPU < rung[b].PerVCPU
				}
				return rung[a].Name < rung[b].Name
			})
			rows = append(rows, rung...)
		}
		return rows, nil
	}
	return nil, inputError{fmt.Sprintf("--class %s: no WorkloadClass of that name in the input", class)}
}

func writeCatalog(c *cobra.Command, rows []catalogRow, format string, commitments bool) error {
	out := c.OutOrStdout()
	if format == "json" {
		if rows == nil {
			rows = []catalogRow{}
		}
		return writeJSON(out, rows)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	header := "RUNG\tTYPE\tARCH\tVCPU\tMEMORY\tGPUS\tON-DEMAND\tSPOT-MIN\tSPOT-AVG\tINTERRUPTION\t$/VCPU-H\tPRICE-SOURCE\tOUTLIER"
	if commitments {
		header += "\tCOMMITMENT\tRATE\tDISCOUNT\tEFFECTIVE-$/VCPU-H\tRATE-SOURCE"
	}
	fmt.Fprintln(w, header)
	for _, r := range rows {
		gpus := "-"
		if r.GPUs > 0 {
			gpus = fmt.Sprintf("%d %s %s", r.GPUs, r.GPUMaker, r.GPUName)
		}
		mem, arch, vcpu, perVCPU := "-", "-", "-", "-"
		if !r.PriceOnly {
			mem, arch, vcpu = fmt.Sprintf("%.1fGi", float64(r.MemoryMiB)/1024), r.Arch, fmt.Sprint(r.VCPU)
			perVCPU = fmt.Sprintf("%.5f", r.PerVCPU)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%.5f\t%s\t%s\t%s\t%s\t%s\t%s", dash(r.Rung), r.Name, arch, vcpu, mem, gpus,
			r.Price.OnDemand, money(r.Price.SpotMin), money(r.Price.SpotAvg), r.Price.Interruption, perVCPU, priceSource(r.Price), dash(r.Outlier))
		switch {
		case !commitments:
		case r.Commitment == nil:
			fmt.Fprint(w, "\t-\t-\t-\t-\t-")
		default:
			fmt.Fprintf(w, "\t%s\t%.6f\t%.1f%%\t%.6f\t%s", r.Commitment.ID, r.Commitment.Rate, 100*r.Commitment.Discount, r.Commitment.PerVCPU, r.Commitment.RateSource)
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// priceSource names one source when both prices share it, else each.
func priceSource(p *catalog.Price) string {
	if p.SpotSource == "" || p.SpotSource == p.OnDemandSource {
		return dash(p.OnDemandSource)
	}
	return "on-demand " + dash(p.OnDemandSource) + "; spot " + p.SpotSource
}

func money(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.5f", v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
