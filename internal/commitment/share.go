package commitment

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Class is what Entitlements needs of one of the Baseline's WorkloadClasses.
type Class struct {
	Name   string
	Labels map[string]string
	// Ignore: the class set spec.weighting.commitments: Ignore and gets no entitlement.
	Ignore bool
}

// Fraction is a class's part of every commitment's share, and the rule behind it.
type Fraction struct {
	Of   float64
	Rule string
}

// Entitlements gives each class its fraction of every commitment's share. A class matched
// by an allocation (the first whose classSelector matches) gets that allocation's percent,
// split equally among the classes it matches. What no allocation claims (100 minus their
// percents) is split equally among the teams of the classes no allocation matches, a team
// being the poolsmith.dev/team label (the classes without one are one team together), then
// equally among a team's classes: a tenant cannot enlarge its part by creating classes,
// labelled or not (were each unlabelled class a team, ten of them would take ten parts). A
// class that ignores commitments gets nothing, and its part goes to the others of its
// group. Nothing is lent between groups: an allocation whose classes are all gone stays
// unused (isolation between teams before soaking up spare).
// noTeam is the team of the classes that carry no poolsmith.dev/team label.
const noTeam = "the classes without a team label"

func Entitlements(allocations []v1alpha1.CommitmentAllocation, classes []Class) map[string]Fraction {
	out := map[string]Fraction{}
	matched := make([][]string, len(allocations))
	teams := map[string][]string{}
	var teamOrder []string
	claimed := 0.0
	for _, a := range allocations {
		claimed += float64(a.Percent)
	}
	for _, c := range classes {
		if c.Ignore {
			out[c.Name] = Fraction{Rule: "spec.weighting.commitments: Ignore"}
			continue
		}
		i := firstMatch(allocations, c.Labels)
		if i >= 0 {
			matched[i] = append(matched[i], c.Name)
			continue
		}
		team, ok := c.Labels[v1alpha1.LabelTeam]
		key := "team " + team
		if !ok || team == "" {
			key = noTeam
		}
		if _, seen := teams[key]; !seen {
			teamOrder = append(teamOrder, key)
		}
		teams[key] = append(teams[key], c.Name)
	}
	for i, names := range matched {
		for _, n := range names {
			out[n] = Fraction{Of: float64(allocations[i].Percent) / 100 / float64(len(names)),
				Rule: ruleOf(i, allocations[i], len(names))}
		}
	}
	rest := max(0, 100-claimed) / 100
	for _, key := range teamOrder {
		names := teams[key]
		for _, n := range names {
			out[n] = Fraction{Of: rest / float64(len(teamOrder)) / float64(len(names)),
				Rule: restRule(rest, len(teamOrder), key, len(names))}
		}
	}
	return out
}

func firstMatch(allocations []v1alpha1.CommitmentAllocation, l map[string]string) int {
	for i, a := range allocations {
		sel, err := metav1.LabelSelectorAsSelector(&a.ClassSelector)
		if err == nil && sel.Matches(labels.Set(l)) {
			return i
		}
	}
	return -1
}
