package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

var (
	rebalanceMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "poolsmith_rebalance_moves_total",
		Help: "Moves of nodes back up a WorkloadClass's ladder, by result (started, succeeded, failed, cancelled).",
	}, []string{"class", "result"})
	rebalanceFallbackNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_rebalance_fallback_nodes",
		Help: "NodeClaims of each WorkloadClass on a rung below its top one.",
	}, []string{"class"})
	rebalanceOldestFallback = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_rebalance_oldest_fallback_seconds",
		Help: "How long the oldest NodeClaim of each WorkloadClass on a fallback rung has existed.",
	}, []string{"class"})
	rebalanceQuiet = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_rebalance_quiet",
		Help: "1 while a WorkloadClass's moves are paused for the quiet period after a failed move.",
	}, []string{"class"})
)

func init() {
	metrics.Registry.MustRegister(rebalanceMoves, rebalanceFallbackNodes, rebalanceOldestFallback, rebalanceQuiet)
}

// moveResults are poolsmith_rebalance_moves_total's result labels.
var moveResults = []string{"started", "succeeded", "failed", "cancelled"}

func recordRebalance(class string, st v1alpha1.RebalanceStatus, now time.Time) {
	// Every result's series exists from the class's first pass, at 0, so a rate or
	// increase over it (the dashboard's moves per hour) reads 0 for a class that has not
	// moved yet rather than no data.
	for _, result := range moveResults {
		rebalanceMoves.WithLabelValues(class, result)
	}
	rebalanceFallbackNodes.WithLabelValues(class).Set(float64(st.FallbackNodes))
	age := 0.0
	if st.OldestFallback != nil {
		age = now.Sub(st.OldestFallback.Time).Seconds()
	}
	rebalanceOldestFallback.WithLabelValues(class).Set(age)
	q := 0.0
	if st.QuietUntil != nil && now.Before(st.QuietUntil.Time) {
		q = 1
	}
	rebalanceQuiet.WithLabelValues(class).Set(q)
}

func forgetRebalance(class string) {
	for _, v := range []*prometheus.GaugeVec{rebalanceFallbackNodes, rebalanceOldestFallback, rebalanceQuiet} {
		v.DeleteLabelValues(class)
	}
	rebalanceMoves.DeletePartialMatch(prometheus.Labels{"class": class})
}

func rebalanceOutcome(reason string) string {
	if reason == v1alpha1.ReasonRebalanceSucceeded {
		return "succeeded"
	}
	return "failed"
}
