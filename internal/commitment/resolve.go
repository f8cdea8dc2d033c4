package commitment

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// Problem is an entry Resolve left out, and why, naming the field.
type Problem struct {
	ID, Field, Reason, Message string
}

// Reasons a commitment is left out.
const (
	ReasonExpired    = v1alpha1.ReasonCommitmentExpired
	ReasonUnresolved = v1alpha1.ReasonCommitmentUnresolved
	// ReasonExportInvalid: the entry needs facts from commitments.json, which could not be
	// read.
	ReasonExportInvalid = v1alpha1.ReasonCommitmentExportInvalid
)

// Export is the signals' commitments.json as Resolve reads it: the facts AWS printed
// (`poolsmith signals commitments`), or why they could not be read. The zero Export is no
// export.
type Export struct {
	Facts *signals.CommitmentFacts
	// Err says why an export present could not be read: the entries that need it are left
	// out with ReasonExportInvalid; the others resolve from the Baseline alone.
	Err error
}

// Origin is the origin of the export's facts: "signals:commitments <exportedAt>".
func (e Export) Origin() string {
	if e.Facts == nil {
		return ""
	}
	return "signals:commitments " + e.Facts.ExportedAt.UTC().Format(time.RFC3339)
}

// OriginBaseline is the origin of a fact the Baseline's entry sets.
const OriginBaseline = "baseline"

// facts collects an entry's resolved facts with their origins.
type facts struct {
	list   []Fact
	export string
}

// str is a fact from the Baseline, else the export ("" when neither has it).
func (f *facts) str(name, baseline, exported string) (string, string) {
	switch {
	case baseline != "":
		f.list = append(f.list, Fact{name, baseline, OriginBaseline})
		return baseline, OriginBaseline
	case exported != "":
		f.list = append(f.list, Fact{name, exported, f.export})
		return exported, f.export
	}
	return "", ""
}

// time is a time fact from the Baseline, else the export.
func (f *facts) time(name string, baseline *metav1.Time, exported *time.Time) (*time.Time, string) {
	switch {
	case baseline != nil:
		t := baseline.Time
		f.list = append(f.list, Fact{name, t.UTC().Format(time.RFC3339), OriginBaseline})
		return &t, OriginBaseline
	case exported != nil:
		f.list = append(f.list, Fact{name, exported.UTC().Format(time.RFC3339), f.export})
		return exported, f.export
	}
	return nil, ""
}

// Resolve reads spec into commitments, each fact taken from the Baseline's entry, else
// from the export's entry of the same id (field by field: an export with a renewed end is
// not masked by an entry that only sets the share); the share is the Baseline's only. An
// entry whose end is not after now, or that lacks the facts to price anything (an id in
// neither the Baseline nor the export, a Savings Plan without a type, a share in percent
// without its commitment; a Reserved Instance without a type or count), is left out and
// reported: commitments never stall a class. The API server has already refused
// malformed figures; one that still fails to parse is reported the same way.
func Resolve(spec *v1alpha1.Commitments, export Export, now time.Time) ([]Commitment, []Problem) {
	if spec == nil {
		return nil, nil
	}
	plans, ris := map[string]*signals.SavingsPlanFacts{}, map[string]*signals.ReservedInstFacts{}
	if export.Facts != nil {
		for i := range export.Facts.SavingsPlans {
			plans[export.Facts.SavingsPlans[i].ID] = &export.Facts.SavingsPlans[i]
		}
		for i := range export.Facts.ReservedInstances {
			ris[export.Facts.ReservedInstances[i].ID] = &export.Facts.ReservedInstances[i]
		}
	}
	var out []Commitment
	var problems []Problem
	leaveOut := func(id, field, reason, format string, args ...any) {
		problems = append(problems, Problem{ID: id, Field: field, Reason: reason, Message: field + ": " + fmt.Sprintf(format, args...)})
	}
	noFacts := func(id, field string) {
		if export.Err != nil {
			leaveOut(id, field+".id", ReasonExportInvalid, "%s has no facts in the Baseline, and the signals' commitments.json cannot be read: %v", id, export.Err)
			return
		}
		leaveOut(id, field+".id", ReasonUnresolved, "%s has no facts in the Baseline or the signals' commitments.json", id)
	}
	expired := func(id, field string, end *time.Time, origin string) bool {
		if end == nil || end.After(now) {
			return false
		}
		suffix := ""
		if origin != OriginBaseline {
			suffix = " (" + origin + ")"
		}
		leaveOut(id, field+".end", ReasonExpired, "%s is past%s", end.UTC().Format(time.RFC3339), suffix)
		return true
	}
	for i, sp := range spec.SavingsPlans {
		field := fmt.Sprintf("spec.commitments.savingsPlans[%d]", i)
		x := plans[sp.ID]
		if x == nil {
			x = &signals.SavingsPlanFacts{}
		}
		f := &facts{export: export.Origin()}
		typ, _ := f.str("type", string(sp.Type), x.Type)
		declared := sp.Type != "" || sp.Commitment != "" || sp.Family != "" || sp.Region != "" || sp.Start != nil || sp.End != nil || sp.Discount != nil
		if typ == "" && plans[sp.ID] == nil && (!declared || export.Err != nil) {
			noFacts(sp.ID, field)
			continue
		}
		amount, _ := f.str("commitment", sp.Commitment, x.Commitment)
		c := Commitment{ID: sp.ID, Field: field}
		c.Family, _ = f.str("family", sp.Family, x.Family)
		c.Region, _ = f.str("region", sp.Region, x.Region)
		f.time("start", sp.Start, x.Start)
		end, endOrigin := f.time("end", sp.End, x.End)
		if expired(sp.ID, field, end, endOrigin) {
			continue
		}
		c.End = end
		switch v1alpha1.SavingsPlanType(typ) {
		case v1alpha1.SavingsPlanCompute:
			c.Kind = ComputeSavingsPlan
		case v1alpha1.SavingsPlanEC2Instance:
			c.Kind = EC2InstanceSavingsPlan
		default:
			leaveOut(sp.ID, field+".type", ReasonUnresolved, "Savings Plan %s has no type (Compute or EC2Instance)", sp.ID)
			continue
		}
		share, err := spShare(sp.Share, amount)
		if err != nil {
			leaveOut(sp.ID, field+".share", ReasonUnresolved, "%v", err)
			continue
		}
		c.Share = share
		if len(x.Rates) > 0 {
			c.Rates, c.RatesRegion, c.RatesOrigin = map[string]float64{}, export.Facts.Region, export.Origin()
			for t, r := range x.Rates {
				if v, err := strconv.ParseFloat(r, 64); err == nil && v > 0 {
					c.Rates[t] = v
				}
			}
			f.list = append(f.list, Fact{"rates", fmt.Sprintf("%d instance types in %s", len(c.Rates), c.RatesRegion), c.RatesOrigin})
		}
		if sp.Discount != nil {
			if sp.Discount.Default != "" {
				d, err := Percent(sp.Discount.Default)
				if err != nil {
					leaveOut(sp.ID, field+".discount.default", ReasonUnresolved, "%v", err)
					continue
				}
				c.DefaultDiscount = &d
				f.list = append(f.list, Fact{"discount.default", sp.Discount.Default, OriginBaseline + ":discount.default"})
			}
			for j, fd := range sp.Discount.Families {
				d, err := Percent(fd.Discount)
				if err != nil {
					leaveOut(sp.ID, fmt.Sprintf("%s.discount.families[%d].discount", field, j), ReasonUnresolved, "%v", err)
					continue
				}
				if c.Discounts == nil {
					c.Discounts = map[string]float64{}
				}
				c.Discounts[fd.Family] = d
				f.list = append(f.list, Fact{"discount.families[" + fd.Family + "]", fd.Discount, OriginBaseline + ":discount.families"})
			}
		}
		c.Facts = f.list
		out = append(out, c)
	}
	for i, ri := range spec.ReservedInstances {
		field := fmt.Sprintf("spec.commitments.reservedInstances[%d]", i)
		x := ris[ri.ID]
		if x == nil {
			x = &signals.ReservedInstFacts{}
		}
		f := &facts{export: export.Origin()}
		instanceType, _ := f.str("instanceType", ri.InstanceType, x.InstanceType)
		declared := ri.InstanceType != "" || ri.Count != nil || ri.Scope != "" || ri.EffectiveHourly != "" || ri.Start != nil || ri.End != nil
		if (instanceType == "" || (ri.Count == nil && x.Count == 0)) && ris[ri.ID] == nil && (!declared || export.Err != nil) {
			noFacts(ri.ID, field)
			continue
		}
		count := ri.Count
		switch {
		case count != nil:
			f.list = append(f.list, Fact{"count", strconv.Itoa(int(*count)), OriginBaseline})
		case x.Count > 0:
			count = &x.Count
			f.list = append(f.list, Fact{"count", strconv.Itoa(int(x.Count)), f.export})
		}
		scope, _ := f.str("scope", string(ri.Scope), x.Scope)
		zone, _ := f.str("zone", ri.Zone, x.Zone)
		hourly, hourlyOrigin := f.str("effectiveHourly", ri.EffectiveHourly, x.EffectiveHourly)
		f.time("start", ri.Start, x.Start)
		end, endOrigin := f.time("end", ri.End, x.End)
		if expired(ri.ID, field, end, endOrigin) {
			continue
		}
		if instanceType == "" || count == nil || ri.Share.Percent == nil {
			leaveOut(ri.ID, field, ReasonUnresolved, "Reserved Instance %s needs instanceType, count and share.percent", ri.ID)
			continue
		}
		c := Commitment{ID: ri.ID, Kind: ReservedInstance, Field: field, InstanceType: instanceType, End: end}
		if v1alpha1.ReservedInstanceScope(scope) == v1alpha1.RIScopeZone {
			c.Zone = zone
		}
		if hourly != "" {
			v, err := Dollars(hourly)
			switch {
			case err == nil:
				c.EffectiveHourly = v
				c.EffectiveHourlyOrigin = hourlyOrigin
				if hourlyOrigin == OriginBaseline {
					c.EffectiveHourlyOrigin = OriginBaseline + ":effectiveHourly"
				}
			case hourlyOrigin == OriginBaseline:
				leaveOut(ri.ID, field+".effectiveHourly", ReasonUnresolved, "%v", err)
				continue
			}
			// An exported figure of 0 (nothing upfront, no hourly charge) prices at the default
			// discount instead.
		}
		c.Share = float64(*count) * NormalizationFactor(instanceType) * float64(*ri.Share.Percent) / 100
		c.Facts = f.list
		out = append(out, c)
	}
	return out, problems
}

// spShare is a Savings Plan's share in US dollars per hour: hourly, or percent of the
// commitment (the Baseline's, else the export's).
func spShare(share v1alpha1.CommitmentShare, commitment string) (float64, error) {
	if share.Hourly != "" {
		return Dollars(share.Hourly)
	}
	if share.Percent == nil {
		return 0, fmt.Errorf("share: exactly one of hourly and percent")
	}
	if commitment == "" {
		return 0, fmt.Errorf("share.percent needs the plan's commitment (spec.commitments.savingsPlans[].commitment, or the signals' commitments.json)")
	}
	c, err := Dollars(commitment)
	if err != nil {
		return 0, err
	}
	return c * float64(*share.Percent) / 100, nil
}
