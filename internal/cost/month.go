package cost

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// AccrualInterval is how often the month to date is brought up to date in status when
// nothing else of status.cost changed: at most one write per class per interval.
const AccrualInterval = 10 * time.Minute

// Month names the month (UTC) t falls in, e.g. 2026-12.
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// Accrue is the month to date at now, from the status last written: its rate (perHour)
// held since its accumulatedAt, counted from the start of the month when the month has
// turned since. Without a previous accrual it starts at 0 now.
func Accrue(prev *v1alpha1.CostStatus, now time.Time) float64 {
	if prev == nil || prev.AccumulatedAt == nil {
		return 0
	}
	from, base := prev.AccumulatedAt.Time, ParseMoney(prev.MonthToDate)
	if prev.Month != Month(now) {
		u := now.UTC()
		start := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
		base = 0
		if from.Before(start) {
			from = start
		}
	}
	if !now.After(from) {
		return base // a clock behind the last accrual adds nothing
	}
	return base + ParseMoney(prev.PerHour)*now.Sub(from).Hours()
}

// Next is the status.cost to write at now, and whether to write it: when the figures
// differ from prev once rounded (write is then immediate, accruing the old rate up to
// now), or when the month to date is due (AccrualInterval since the last accrual, or a
// new month). A class that never had a priced or pending NodeClaim and has no status.cost
// writes none.
func Next(prev *v1alpha1.CostStatus, b Breakdown, now time.Time) (*v1alpha1.CostStatus, bool) {
	next := b.Status()
	if prev == nil && next.PerHour == Money(0) && len(next.Rungs) == 0 && next.Unpriced == "" {
		return nil, false
	}
	if prev != nil {
		// Compare the figures alone: the accrual fields are judged below.
		was := prev.DeepCopy()
		was.MonthToDate, was.Month, was.AccumulatedAt = "", "", nil
		due := prev.AccumulatedAt == nil || prev.Month != Month(now) || now.Sub(prev.AccumulatedAt.Time) >= AccrualInterval
		if equality.Semantic.DeepEqual(*was, next) && !due {
			return prev, false
		}
	}
	next.MonthToDate = Money(Accrue(prev, now))
	next.Month = Month(now)
	next.AccumulatedAt = &metav1.Time{Time: now.Truncate(time.Second)}
	return &next, true
}
