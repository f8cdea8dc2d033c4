package cost

import (
	"fmt"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Verdict is a class's cost judged against its spec.budget.
type Verdict struct {
	Mode v1alpha1.BudgetMode
	// PerHour is what the class costs now; Budget its spec.budget.perHour.
	PerHour, Budget float64
	// Over: the class costs its budget or more.
	Over bool
	// Hold: Over under mode Enforce, so every rung's limits are held at its usage.
	Hold bool
	// Committed: PerHour is the effective price, covered parts at the commitments' rates.
	Committed bool
}

// Judge weighs what the class costs now against its budget; nil without a budget. An
// unreadable perHour (admission refuses one) holds nothing.
func Judge(b *v1alpha1.Budget, perHour float64) *Verdict {
	if b == nil {
		return nil
	}
	v := &Verdict{Mode: b.Mode, PerHour: perHour, Budget: ParseMoney(b.PerHour)}
	if v.Mode == "" {
		v.Mode = v1alpha1.BudgetEnforce
	}
	// Compared as status shows them, so the condition and the column agree.
	v.Over = v.Budget > 0 && ParseMoney(Money(perHour)) >= ParseMoney(Money(v.Budget))
	v.Hold = v.Over && v.Mode == v1alpha1.BudgetEnforce
	return v
}

// Message says where the class stands against its budget, for the BudgetExceeded
// condition.
func (v *Verdict) Message() string {
	at := fmt.Sprintf("the class's launched NodeClaims cost $%s/h, its budget is $%s/h", Money(v.PerHour), Money(v.Budget))
	if v.Committed {
		at = fmt.Sprintf("the class's launched NodeClaims cost $%s/h at their effective price (what a Savings Plan or Reserved Instance covers at its rate), its budget is $%s/h", Money(v.PerHour), Money(v.Budget))
	}
	switch {
	case v.Hold:
		return at + ": every rung's limits are held at what it uses (its NodePool's status.resources), so Karpenter launches no new node for the class, replacements for drift or consolidation included, and rebalance moves are suspended until it costs less"
	case v.Over:
		return at + " (mode Warn: nothing is held)"
	}
	return at
}
