package lint

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/render"
)

// Commitment checks (docs/commitments.md).
const (
	// CheckCommitmentExpiresSoon: a declared commitment ends within expiryHorizon.
	CheckCommitmentExpiresSoon = "commitment-expires-soon"
	// CheckCommitmentDiverseRung: a family-scoped commitment covers only part of the types
	// a Diverse on-demand rung launches.
	CheckCommitmentDiverseRung = "commitment-diverse-rung"
)

// Checks of the signals' commitments.json (docs/commitments.md, From the AWS CLI).
const (
	// CheckCommitmentUnresolved: an entry of the Baseline has no facts to price with, in
	// the Baseline or the export (or the export cannot be read); the manager leaves it out.
	CheckCommitmentUnresolved = "commitment-unresolved"
	// CheckCommitmentsExportOld: the export is older than exportHorizon, so commitments
	// bought since are missing from it.
	CheckCommitmentsExportOld = "commitments-export-old"
)

// expiryHorizon is how soon a commitment's end makes lint warn.
const expiryHorizon = 30 * 24 * time.Hour

// exportHorizon is how old an export may be before lint warns: a plan's facts do not
// drift, but purchases made since are missing.
const exportHorizon = 30 * 24 * time.Hour

// Commitments warns, once per Baseline, about each commitment that ends within 30 days of
// opts.Commitments.Now (or the wall clock), and, per class that uses commitments, about
// each Diverse on-demand rung that a family-scoped commitment (an EC2 Instance Savings
// Plan or a Reserved Instance) covers only in part: Karpenter picks among the rung's types
// by list price, so most of its launches may be uncovered while the rung ranks by the
// median type's price.
func Commitments(classes []Class, opts render.Options) []Finding {
	now := opts.Commitments.Now
	if now.IsZero() {
		now = time.Now()
	}
	cat, region := priced(opts)
	var findings []Finding
	if f := opts.Commitments.Export.Facts; f != nil && now.Sub(f.ExportedAt) > exportHorizon {
		findings = append(findings, Finding{Severity: Warning, Object: "commitments.json", Check: CheckCommitmentsExportOld,
			Message: fmt.Sprintf("exported %s, %d days ago: Savings Plans and Reserved Instances bought since are missing; run poolsmith signals commitments again",
				f.ExportedAt.UTC().Format(time.RFC3339), int(now.Sub(f.ExportedAt).Hours()/24))})
	}
	seen := map[string]bool{}
	for _, c := range classes {
		if c.Err != nil || c.Result == nil {
			continue
		}
		settings := c.Result.Settings.Commitments
		if c.Baseline != nil && !seen[c.Baseline.Name] {
			seen[c.Baseline.Name] = true
			for _, p := range settings.LeftOut {
				if p.Reason == commitment.ReasonUnresolved || p.Reason == commitment.ReasonExportInvalid {
					findings = append(findings, Finding{Severity: Error, Object: "Baseline/" + c.Baseline.Name, Check: CheckCommitmentUnresolved,
						Message: p.Message + ": it prices nothing (the manager leaves it out); name an id the export has, run poolsmith signals commitments, or set its facts in the Baseline"})
				}
			}
			for _, d := range settings.Declared {
				if d.End != nil && d.End.Sub(now) < expiryHorizon {
					findings = append(findings, Finding{Severity: Warning, Object: "Baseline/" + c.Baseline.Name, Check: CheckCommitmentExpiresSoon,
						Message: fmt.Sprintf("%s.end: %s ends %s, in %d days: from then on it prices no rung; renew it and update end, or remove it",
							d.Field, d.Describe(), d.End.UTC().Format(time.RFC3339), int(d.End.Sub(now).Hours()/24))})
				}
			}
		}
		if settings.Use == v1alpha1.CommitmentsIgnore {
			continue
		}
		for i, rung := range c.Result.Rungs {
			if rung.CapacityType != v1alpha1.CapacityTypeOnDemand || rung.SliceKind != render.SliceNone {
				continue
			}
			reqs := c.Result.NodePools[i].Spec.Template.Spec.Requirements
			for _, d := range settings.Declared {
				if d.Kind == commitment.ComputeSavingsPlan {
					continue
				}
				covered, others := map[string]bool{}, map[string]bool{}
				for _, t := range cat.Types {
					if _, ok := cat.Prices[region][t.Name]; !ok || t.PriceOnly || !t.Matches(reqs) {
						continue
					}
					if d.Covers(t, region, "") {
						covered[t.Family] = true
					} else {
						others[t.Family] = true
					}
				}
				if len(covered) == 0 || len(others) == 0 {
					continue
				}
				findings = append(findings, Finding{Severity: Warning, Object: "NodePool/" + c.Result.NodePools[i].Name, Check: CheckCommitmentDiverseRung,
					Message: fmt.Sprintf("%s covers family %s of this Diverse rung, which also allows %d other families (%s): Karpenter picks among them by list price, so launches of the rung may go uncovered; give the covered family a rung of its own (consistency: Family, or instances.families)",
						d.Describe(), strings.Join(sorted(covered), ", "), len(others), sample(sorted(others), 5))})
			}
		}
	}
	return findings
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sample names at most n of list, and says how many more there are.
func sample(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:n], ", ") + fmt.Sprintf(" and %d more", len(list)-n)
}
