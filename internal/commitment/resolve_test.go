package commitment_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/commitment"
	"github.com/poolsmith/poolsmith/internal/signals"
)

var exportedAt = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const exportOrigin = "signals:commitments 2026-12-01T12:00:00Z"

// export is what `poolsmith signals commitments` writes for the worked example's plan and
// one Reserved Instance, with AWS's rate for m7g.xlarge.
func export() commitment.Export {
	start, end := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)
	return commitment.Export{Facts: &signals.CommitmentFacts{ExportedAt: exportedAt, Region: "us-east-1",
		SavingsPlans: []signals.SavingsPlanFacts{{ID: "sp-0a1b2c3d", Type: "EC2Instance", Commitment: "3.0", Family: "m7g", Region: "us-east-1",
			State: "active", Start: &start, End: &end, Rates: map[string]string{"m7g.xlarge": "0.112608", "m7g.large": "0.056304"}}},
		ReservedInstances: []signals.ReservedInstFacts{{ID: "ri-1", InstanceType: "m7g.large", Count: 10, Scope: "Region",
			EffectiveHourly: "0.0646", Start: &start, End: &end}}}}
}

func onlyShare(id string, percent int32) v1alpha1.SavingsPlan {
	return v1alpha1.SavingsPlan{ID: id, Share: v1alpha1.CommitmentShare{Percent: ptr.To(percent)}}
}

func fact(c commitment.Commitment, name string) commitment.Fact {
	for _, f := range c.Facts {
		if f.Name == name {
			return f
		}
	}
	return commitment.Fact{}
}

// The precedence of docs/design/commitments.md §3: each fact from the Baseline, else the
// export, by id; the share from the Baseline only; a type's rate from the Baseline's family
// discount, else the exported rate, else the Baseline's default discount.
func TestResolvePrecedence(t *testing.T) {
	cat, _ := types(t)
	m7gXL, m7gL, c7gXL := cat.Types["m7g.xlarge"], cat.Types["m7g.large"], cat.Types["c7g.xlarge"]
	od := func(name string) float64 { return cat.Prices["us-east-1"][name].OnDemand }
	renewed := metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name   string
		plan   v1alpha1.SavingsPlan
		export commitment.Export
		check  func(t *testing.T, c commitment.Commitment)
	}{{
		name: "id and share only: every fact from the export, the share from the Baseline", plan: onlyShare("sp-0a1b2c3d", 40), export: export(),
		check: func(t *testing.T, c commitment.Commitment) {
			if c.Kind != commitment.EC2InstanceSavingsPlan || c.Family != "m7g" || c.Region != "us-east-1" || !near(c.Share, 1.2) {
				t.Errorf("resolved %+v, want EC2Instance m7g us-east-1 with a share of $1.20/h (40 %% of the export's $3.0)", c)
			}
			for _, name := range []string{"type", "commitment", "family", "region", "start", "end", "rates"} {
				if f := fact(c, name); f.Origin != exportOrigin {
					t.Errorf("fact %s: origin %q, want %q", name, f.Origin, exportOrigin)
				}
			}
			if c.End == nil || !c.End.Equal(time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("end %v, want the export's 2027-06-01", c.End)
			}
		},
	}, {
		name: "a fact the Baseline sets wins over the export's, field by field",
		plan: func() v1alpha1.SavingsPlan {
			p := onlyShare("sp-0a1b2c3d", 40)
			p.Commitment, p.End = "2.00", &renewed
			return p
		}(), export: export(),
		check: func(t *testing.T, c commitment.Commitment) {
			if !near(c.Share, 0.8) || fact(c, "commitment").Origin != "baseline" || fact(c, "end").Origin != "baseline" || !c.End.Equal(renewed.Time) {
				t.Errorf("share %g, commitment %+v, end %+v: want $0.80/h from the Baseline's $2.00 and its end", c.Share, fact(c, "commitment"), fact(c, "end"))
			}
			if fact(c, "family").Origin != exportOrigin {
				t.Errorf("family %+v: the Baseline does not set it, so the export's", fact(c, "family"))
			}
		},
	}, {
		name: "a type's rate: the exported rate beats discount.default", export: export(),
		plan: func() v1alpha1.SavingsPlan {
			p := onlyShare("sp-0a1b2c3d", 40)
			p.Discount = &v1alpha1.Discount{Default: "10%"}
			return p
		}(),
		check: func(t *testing.T, c commitment.Commitment) {
			if rate, source, ok := c.Rate(m7gXL, od("m7g.xlarge"), "us-east-1", ""); !ok || !near(rate, 0.112608) || source != exportOrigin {
				t.Errorf("m7g.xlarge: %g from %q, want the exported 0.112608 from %q", rate, source, exportOrigin)
			}
			// The export has no rate for m7g.2xlarge: the Baseline's default discount prices it.
			x2 := cat.Types["m7g.2xlarge"]
			if rate, source, ok := c.Rate(x2, od("m7g.2xlarge"), "us-east-1", ""); !ok || !near(rate, od("m7g.2xlarge")*0.9) || source != "baseline:discount.default" {
				t.Errorf("m7g.2xlarge: %g from %q, want on-demand x 0.90 from baseline:discount.default", rate, source)
			}
		},
	}, {
		name: "a type's rate: the Baseline's family discount beats the exported rate", export: export(),
		plan: func() v1alpha1.SavingsPlan {
			p := onlyShare("sp-0a1b2c3d", 40)
			p.Discount = &v1alpha1.Discount{Default: "10%", Families: []v1alpha1.FamilyDiscount{{Family: "m7g", Discount: "50%"}}}
			return p
		}(),
		check: func(t *testing.T, c commitment.Commitment) {
			if rate, source, ok := c.Rate(m7gL, od("m7g.large"), "us-east-1", ""); !ok || !near(rate, od("m7g.large")*0.5) || source != "baseline:discount.families" {
				t.Errorf("m7g.large: %g from %q, want on-demand x 0.50 from baseline:discount.families", rate, source)
			}
		},
	}, {
		name: "an exported rate prices only in the export's region", export: export(),
		plan: onlyShare("sp-0a1b2c3d", 40),
		check: func(t *testing.T, c commitment.Commitment) {
			if _, _, ok := c.Rate(m7gXL, od("m7g.xlarge"), "us-west-2", ""); ok {
				t.Error("an EC2Instance plan of us-east-1 priced m7g.xlarge in us-west-2")
			}
			if _, _, ok := c.Rate(c7gXL, od("c7g.xlarge"), "us-east-1", ""); ok {
				t.Error("an m7g plan priced c7g.xlarge")
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cs, problems := commitment.Resolve(&v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{tc.plan}}, tc.export, now)
			if len(problems) > 0 || len(cs) != 1 {
				t.Fatalf("resolved %d, problems %+v", len(cs), problems)
			}
			tc.check(t, cs[0])
		})
	}
}

// A Reserved Instance naming only id and share prices as the fully declared one: its type,
// count and effectiveHourly come from the export.
func TestResolveReservedInstanceFromExport(t *testing.T) {
	cat, _ := types(t)
	ri := v1alpha1.ReservedInstance{ID: "ri-1", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](50)}}
	cs, problems := commitment.Resolve(&v1alpha1.Commitments{ReservedInstances: []v1alpha1.ReservedInstance{ri}}, export(), now)
	if len(problems) > 0 || len(cs) != 1 {
		t.Fatalf("resolved %d, problems %+v", len(cs), problems)
	}
	c := cs[0]
	if c.InstanceType != "m7g.large" || !near(c.Share, 20) { // 10 x 4 units x 50 %
		t.Errorf("resolved %s with %g units, want m7g.large with 20", c.InstanceType, c.Share)
	}
	x := cat.Types["m7g.xlarge"]
	if rate, source, ok := c.Rate(x, cat.Prices["us-east-1"]["m7g.xlarge"].OnDemand, "us-east-1", ""); !ok || !near(rate, 0.1292) || source != exportOrigin {
		t.Errorf("m7g.xlarge under it: %g from %q, want 2 x 0.0646 from %q", rate, source, exportOrigin)
	}
}

func TestResolveLeavesOut(t *testing.T) {
	past := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	expiredExport := export()
	expiredExport.Facts.SavingsPlans[0].End = &past
	for _, tc := range []struct {
		name                  string
		spec                  *v1alpha1.Commitments
		export                commitment.Export
		field, reason, prefix string
	}{{
		name: "an id with facts nowhere", spec: &v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{onlyShare("sp-x", 40)}}, export: export(),
		field: "spec.commitments.savingsPlans[0].id", reason: commitment.ReasonUnresolved,
		prefix: "spec.commitments.savingsPlans[0].id: sp-x has no facts in the Baseline or the signals' commitments.json",
	}, {
		name: "an id with facts nowhere, and no export", spec: &v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{onlyShare("sp-0a1b2c3d", 40)}},
		field: "spec.commitments.savingsPlans[0].id", reason: commitment.ReasonUnresolved,
		prefix: "spec.commitments.savingsPlans[0].id: sp-0a1b2c3d has no facts in the Baseline or the signals' commitments.json",
	}, {
		name: "a Reserved Instance with facts nowhere", export: export(),
		spec:  &v1alpha1.Commitments{ReservedInstances: []v1alpha1.ReservedInstance{{ID: "ri-2", Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](50)}}}},
		field: "spec.commitments.reservedInstances[0].id", reason: commitment.ReasonUnresolved,
		prefix: "spec.commitments.reservedInstances[0].id: ri-2 has no facts in the Baseline or the signals' commitments.json",
	}, {
		name: "an export that cannot be read", spec: &v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{onlyShare("sp-0a1b2c3d", 40)}},
		export: commitment.Export{Err: errors.New("commitments.json: exportedAt is missing")},
		field:  "spec.commitments.savingsPlans[0].id", reason: commitment.ReasonExportInvalid,
		prefix: "spec.commitments.savingsPlans[0].id: sp-0a1b2c3d has no facts in the Baseline, and the signals' commitments.json cannot be read: commitments.json: exportedAt is missing",
	}, {
		name: "an end past in the export", spec: &v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{onlyShare("sp-0a1b2c3d", 40)}}, export: expiredExport,
		field: "spec.commitments.savingsPlans[0].end", reason: commitment.ReasonExpired,
		prefix: "spec.commitments.savingsPlans[0].end: 2026-11-01T00:00:00Z is past (" + exportOrigin + ")",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cs, problems := commitment.Resolve(tc.spec, tc.export, now)
			if len(cs) != 0 || len(problems) != 1 {
				t.Fatalf("resolved %d, problems %+v; want one problem", len(cs), problems)
			}
			p := problems[0]
			if p.Field != tc.field || p.Reason != tc.reason || !strings.HasPrefix(p.Message, tc.prefix) {
				t.Errorf("problem %+v\nwant field %s, reason %s, message %q", p, tc.field, tc.reason, tc.prefix)
			}
		})
	}
}

// A fully declared entry needs no export, and a corrupt export does not touch it.
func TestResolveDeclaredIgnoresABadExport(t *testing.T) {
	cs, problems := commitment.Resolve(workedExample(), commitment.Export{Err: errors.New("bad")}, now)
	if len(problems) != 0 || len(cs) != 1 || !near(cs[0].Share, 1.2) {
		t.Fatalf("resolved %+v, problems %+v", cs, problems)
	}
}
