package cli

import (
	"fmt"
	"slices"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
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
}

func newCatalogCommand() *cobra.Command {
	var flags inputFlags
	var class string
	var missing bool
	c := &cobra.Command{
		Use:   "catalog [--region R] [-f PATH --class NAME] [--missing-facts]",
		Short: "List instance types from the embedded catalog, with prices and interruption buckets",
		Long: `List the embedded catalog's instance types with their facts and, for --region, their
on-demand and spot prices (USD per hour, Linux) and Spot Instance Advisor interruption
bucket. With -f and --class, list per rung the types the rung allows, cheapest per vCPU
first. --missing-facts lists the types known only by price (from Karpenter's table).`,
		Example: `  poolsmith catalog --region eu-west-1
  poolsmith catalog -f config/samples/ --class gpu
  poolsmith catalog --missing-facts`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := flags.options()
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
			var rows []catalogRow
			switch {
			case missing:
				for _, name := range cat.MissingFacts() {
					p := cat.Prices["us-east-1"][name]
					rows = append(rows, catalogRow{InstanceType: cat.Types[name], Price: &p, HourlyPrice: p.OnDemand})
				}
			case class != "":
				if rows, err = classRows(c, &flags, cat, region, class); err != nil {
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
			return writeCatalog(c, rows, flags.output)
		},
	}
	flags.register(c, "table (default) or json")
	c.Flags().StringVar(&class, "class", "", "with -f: list the types each rung of this WorkloadClass allows")
	c.Flags().BoolVar(&missing, "missing-facts", false, "list the types known only by their us-east-1 price")
	return c
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
func classRows(c *cobra.Command, flags *inputFlags, cat *catalog.Catalog, region, class string) ([]catalogRow, error) {
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
				rung = append(rung, priced(np.Name, t, p, hourly))
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

func writeCatalog(c *cobra.Command, rows []catalogRow, format string) error {
	out := c.OutOrStdout()
	if format == "json" {
		if rows == nil {
			rows = []catalogRow{}
		}
		return writeJSON(out, rows)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "RUNG\tTYPE\tARCH\tVCPU\tMEMORY\tGPUS\tON-DEMAND\tSPOT-MIN\tSPOT-AVG\tINTERRUPTION\t$/VCPU-H")
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
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%.5f\t%s\t%s\t%s\t%s\n", dash(r.Rung), r.Name, arch, vcpu, mem, gpus,
			r.Price.OnDemand, money(r.Price.SpotMin), money(r.Price.SpotAvg), r.Price.Interruption, perVCPU)
	}
	return w.Flush()
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
