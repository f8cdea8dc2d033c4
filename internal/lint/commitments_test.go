package lint_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/lint"
	"github.com/poolsmith/poolsmith/internal/render"
)

// committed renders a class on a Baseline with an EC2 Instance Savings Plan for m7g that
// ends at end, linted at lintNow.
func committed(t *testing.T, end time.Time, spec v1alpha1.WorkloadClassSpec) []lint.Finding {
	t.Helper()
	b := baseline()
	b.Spec.Commitments = &v1alpha1.Commitments{SavingsPlans: []v1alpha1.SavingsPlan{{
		ID: "sp-0a1b2c3d", Type: v1alpha1.SavingsPlanEC2Instance, Commitment: "3.00", Family: "m7g", Region: "us-east-1",
		Discount: &v1alpha1.Discount{Default: "31%"}, End: &metav1.Time{Time: end}, Share: v1alpha1.CommitmentShare{Percent: ptr.To[int32](40)},
	}}}
	wc := class("web", spec)
	opts := render.Options{Commitments: render.CommitmentOptions{Now: lintNow, Offline: true}}
	res, err := render.Render(b, wc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return lint.Lint([]lint.Class{{Class: wc, Baseline: b, Result: res}}, opts)
}

func only(findings []lint.Finding, check string) []lint.Finding {
	var out []lint.Finding
	for _, f := range findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// A plan ending within 30 days is a warning on its Baseline naming the field and the day;
// one ending later is none.
func TestCommitmentExpiresSoon(t *testing.T) {
	arm := v1alpha1.WorkloadClassSpec{Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64}}
	got := only(committed(t, lintNow.Add(10*24*time.Hour), arm), lint.CheckCommitmentExpiresSoon)
	if len(got) != 1 || got[0].Object != "Baseline/default" || got[0].Severity != lint.Warning ||
		!strings.Contains(got[0].Message, "spec.commitments.savingsPlans[0].end: Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1) ends 2026-12-12T12:00:00Z, in 10 days") {
		t.Fatalf("findings = %v", got)
	}
	if got := only(committed(t, lintNow.Add(31*24*time.Hour), arm), lint.CheckCommitmentExpiresSoon); len(got) != 0 {
		t.Errorf("31 days out: %v", got)
	}
}

// A Diverse on-demand rung allowing c and m families is covered by the m7g plan only in
// part: a warning on the rung. A Diverse rung of m7g alone, Family rungs (one family
// each), and a class that ignores commitments, are quiet.
func TestCommitmentCoversPartOfADiverseRung(t *testing.T) {
	end := lintNow.Add(365 * 24 * time.Hour)
	spec := v1alpha1.WorkloadClassSpec{
		Architectures: []v1alpha1.Architecture{v1alpha1.ArchitectureARM64},
		CapacityTypes: []v1alpha1.CapacityType{v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand},
		Instances:     &v1alpha1.InstanceShape{Families: []string{"m7g", "c7g"}},
	}
	got := only(committed(t, end, spec), lint.CheckCommitmentDiverseRung)
	if len(got) != 1 || got[0].Object != "NodePool/web-on-demand-arm64" || !strings.Contains(got[0].Message, "covers family m7g of this Diverse rung, which also allows 1 other families (c7g)") {
		t.Fatalf("findings = %v", got)
	}
	onlyCovered := spec
	onlyCovered.Instances = &v1alpha1.InstanceShape{Families: []string{"m7g"}}
	if got := only(committed(t, end, onlyCovered), lint.CheckCommitmentDiverseRung); len(got) != 0 {
		t.Errorf("a Diverse rung of the covered family only: %v", got)
	}
	family := spec
	family.Consistency = v1alpha1.ConsistencyFamily
	if got := only(committed(t, end, family), lint.CheckCommitmentDiverseRung); len(got) != 0 {
		t.Errorf("Family rungs: %v", got)
	}
	ignore := spec
	ignore.Weighting = &v1alpha1.Weighting{Commitments: v1alpha1.CommitmentsIgnore}
	if got := only(committed(t, end, ignore), lint.CheckCommitmentDiverseRung); len(got) != 0 {
		t.Errorf("a class that ignores commitments: %v", got)
	}
}
