package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// classCondition is 1 for the status each condition of each class has now.
	classCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_workloadclass_condition",
		Help: "WorkloadClass conditions: 1 for the current status of each condition type.",
	}, []string{"class", "type", "status"})
	// rungs is the number of NodePools each class renders.
	rungs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_workloadclass_rungs",
		Help: "NodePools rendered for each WorkloadClass.",
	}, []string{"class"})
	// applies counts server-side applies by kind and result.
	applies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "poolsmith_applies_total",
		Help: "Server-side applies of generated objects, by kind and result (applied, unchanged, failed, conflict).",
	}, []string{"kind", "result"})
	// reconcileErrors counts reconciles that ended in an error, by Synced reason.
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "poolsmith_reconcile_errors_total",
		Help: "WorkloadClass reconciles that did not sync, by Synced reason.",
	}, []string{"reason"})
)

func init() {
	metrics.Registry.MustRegister(classCondition, rungs, applies, reconcileErrors)
}

func recordConditions(class string, conditions map[string]string) {
	classCondition.DeletePartialMatch(prometheus.Labels{"class": class})
	for typ, status := range conditions {
		classCondition.WithLabelValues(class, typ, status).Set(1)
	}
}

func forgetClass(class string) {
	classCondition.DeletePartialMatch(prometheus.Labels{"class": class})
	rungs.DeleteLabelValues(class)
}
