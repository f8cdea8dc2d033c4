package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
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
	// applies counts the plan steps carried out, by kind and action.
	applies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "poolsmith_applies_total",
		Help: "Plan steps for generated objects, by kind and result (create, update, revive, retire, orphan, delete, unchanged, failed).",
	}, []string{"kind", "result"})
	// reconcileErrors counts reconciles that returned an error, by the Synced reason then.
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "poolsmith_reconcile_errors_total",
		Help: "WorkloadClass reconciles that returned an error, by Synced reason (InvalidSpec, ApplyFailed, ...; Error when Synced is not False).",
	}, []string{"reason"})
	// notSynced is how many classes are Synced=False now, by reason.
	notSynced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_workloadclasses_not_synced",
		Help: "WorkloadClasses whose Synced condition is False, by reason.",
	}, []string{"reason"})
)

func init() {
	metrics.Registry.MustRegister(classCondition, rungs, applies, reconcileErrors, notSynced)
}

// notSyncedReasons is each class's Synced=False reason, behind the notSynced gauge.
var notSyncedReasons = struct {
	sync.Mutex
	byClass map[string]string
}{byClass: map[string]string{}}

func recordConditions(wc *v1alpha1.WorkloadClass) {
	classCondition.DeletePartialMatch(prometheus.Labels{"class": wc.Name})
	for _, c := range wc.Status.Conditions {
		classCondition.WithLabelValues(wc.Name, c.Type, string(c.Status)).Set(1)
	}
	reason := ""
	if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced); c != nil && c.Status == metav1.ConditionFalse {
		reason = c.Reason
	}
	setNotSynced(wc.Name, reason)
}

func setNotSynced(class, reason string) {
	notSyncedReasons.Lock()
	defer notSyncedReasons.Unlock()
	if reason == "" {
		delete(notSyncedReasons.byClass, class)
	} else {
		notSyncedReasons.byClass[class] = reason
	}
	counts := map[string]int{}
	for _, r := range notSyncedReasons.byClass {
		counts[r]++
	}
	notSynced.Reset()
	for r, n := range counts {
		notSynced.WithLabelValues(r).Set(float64(n))
	}
}

// countError counts a reconcile that returned err.
func countError(wc *v1alpha1.WorkloadClass, err error) {
	if err == nil {
		return
	}
	reason := "Error"
	if c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced); c != nil && c.Status == metav1.ConditionFalse {
		reason = c.Reason
	}
	reconcileErrors.WithLabelValues(reason).Inc()
}

func forgetClass(class string) {
	forgetClassCommitments(class)
	classCondition.DeletePartialMatch(prometheus.Labels{"class": class})
	rungs.DeleteLabelValues(class)
	budgetExceeded.DeleteLabelValues(class)
	setNotSynced(class, "")
	forgetHeadroom(class)
}
