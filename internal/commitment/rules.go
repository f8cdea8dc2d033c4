package commitment

import (
	"fmt"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

func ruleOf(i int, a v1alpha1.CommitmentAllocation, classes int) string {
	s := fmt.Sprintf("allocations[%d]: %d%%", i, a.Percent)
	if classes > 1 {
		s += fmt.Sprintf(" split among its %d classes", classes)
	}
	return s
}

func restRule(rest float64, teams int, team string, classes int) string {
	s := fmt.Sprintf("%.4g%% not allocated, split equally among %d teams (%s", rest*100, teams, team)
	if classes > 1 {
		s += fmt.Sprintf(", split among its %d classes", classes)
	}
	return s + ")"
}
