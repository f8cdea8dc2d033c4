package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/poolsmith/poolsmith/internal/observe"
)

// The commitment gauges: at most 70 commitments a Baseline (the API's bound), a class's
// series only for the Baseline's commitments, deleted with the class, the commitment or
// the Baseline.
var (
	commitmentUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_commitment_used_ratio",
		Help: "How much of a Savings Plan's or Reserved Instance's share is used, 0 to 1: a class's nodes against its entitlement, or (class=\"\") all the Baseline's classes' nodes against this cluster's share.",
	}, []string{"baseline", "commitment", "class"})
	commitmentOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_commitment_open",
		Help: "1 while a commitment is Open for a class (the rungs it covers rank by its price), 0 while it is Exhausted; its changes are the flips.",
	}, []string{"class", "commitment"})
	commitmentEnd = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_commitment_end_timestamp_seconds",
		Help: "When a Baseline's Savings Plan or Reserved Instance ends, Unix seconds: to alert before it expires.",
	}, []string{"baseline", "commitment"})
)

func init() {
	metrics.Registry.MustRegister(commitmentUsed, commitmentOpen, commitmentEnd)
}

// recordClassCommitments replaces the class's commitment series with what the pass
// tracked; nil removes them.
func recordClassCommitments(class, baseline string, cov *observe.Coverage) {
	forgetClassCommitments(class)
	if cov == nil {
		return
	}
	for _, c := range cov.Declared {
		if ent := cov.Entitlements[c.ID]; ent > 0 {
			commitmentUsed.WithLabelValues(baseline, c.ID, class).Set(min(cov.Ledger.Used[c.ID]/ent, 1))
		}
		if st, ok := cov.States[c.ID]; ok {
			open := 0.0
			if st.Open {
				open = 1
			}
			commitmentOpen.WithLabelValues(class, c.ID).Set(open)
		}
	}
}

func forgetClassCommitments(class string) {
	commitmentUsed.DeletePartialMatch(prometheus.Labels{"class": class})
	commitmentOpen.DeletePartialMatch(prometheus.Labels{"class": class})
}

// forgetBaselineCommitments removes the Baseline's pooled series (class="") and its end
// dates.
func forgetBaselineCommitments(baseline string) {
	commitmentUsed.DeletePartialMatch(prometheus.Labels{"baseline": baseline, "class": ""})
	commitmentEnd.DeletePartialMatch(prometheus.Labels{"baseline": baseline})
}
