package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/poolsmith/poolsmith/internal/cost"
)

// The cost gauges carry the class, its rung and the capacity type: at most the class's
// rungs (20, and any retiring) times one capacity type each, and cost.Other for
// NodeClaims of rungs or capacity types the class does not have.
var (
	classCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_class_cost_per_hour",
		Help: "What a WorkloadClass's launched NodeClaims cost, US dollars per hour, by rung and capacity type, priced from the catalog the weights use.",
	}, []string{"class", "rung", "capacity_type"})
	classFallbackPremium = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_class_fallback_premium_per_hour",
		Help: "What a WorkloadClass's NodeClaims on rungs below its preferred one cost above the same capacity on the preferred rung, US dollars per hour.",
	}, []string{"class", "rung", "capacity_type"})
	classNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_class_nodes",
		Help: "A WorkloadClass's priced (launched) NodeClaims, by rung and capacity type: the ladder's occupancy.",
	}, []string{"class", "rung", "capacity_type"})
	classIdleCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_class_idle_cost_per_hour",
		Help: "The part of a WorkloadClass's cost paid for allocatable capacity no pod requests, US dollars per hour.",
	}, []string{"class", "rung", "capacity_type"})
)

func init() {
	metrics.Registry.MustRegister(classCost, classFallbackPremium, classIdleCost, classNodes, budgetExceeded)
}

var budgetExceeded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "poolsmith_class_budget_exceeded",
	Help: "1 while a WorkloadClass costs its spec.budget or more (its BudgetExceeded condition is True), 0 under it; no series without a budget.",
}, []string{"class"})

// recordBudget sets the class's budget gauge; over nil removes it (no budget).
func recordBudget(class string, over *bool) {
	switch {
	case over == nil:
		budgetExceeded.DeleteLabelValues(class)
	case *over:
		budgetExceeded.WithLabelValues(class).Set(1)
	default:
		budgetExceeded.WithLabelValues(class).Set(0)
	}
}

// recordCost replaces the class's cost series with the breakdown's.
func recordCost(class string, b cost.Breakdown) {
	forgetCost(class)
	for _, r := range b.Rungs {
		classCost.WithLabelValues(class, r.Rung, r.CapacityType).Set(r.PerHour)
		classNodes.WithLabelValues(class, r.Rung, r.CapacityType).Set(float64(r.Nodes))
		classIdleCost.WithLabelValues(class, r.Rung, r.CapacityType).Set(r.Idle)
		if r.Fallback {
			classFallbackPremium.WithLabelValues(class, r.Rung, r.CapacityType).Set(r.Premium)
		}
	}
}

func forgetCost(class string) {
	for _, v := range []*prometheus.GaugeVec{classCost, classFallbackPremium, classIdleCost, classNodes} {
		v.DeletePartialMatch(prometheus.Labels{"class": class})
	}
}
