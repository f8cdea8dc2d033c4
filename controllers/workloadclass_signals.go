package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// CostSignals is where the controller finds spot signals and how it judges them.
type CostSignals struct {
	// ConfigMap holds the Spot Instance Advisor feed (and optional price overrides).
	ConfigMap types.NamespacedName
	// Region is the cluster's region: it selects the feed's and the catalog's prices.
	Region string
	// MaxAge is how old signals may be before they are Stale and ignored.
	MaxAge time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu       sync.Mutex
	version  string // resourceVersion of the ConfigMap last parsed
	parsed   *signals.Signals
	overlaid *catalog.Catalog
	parseErr error
}

// +kubebuilder:rbac:groups="",namespace=poolsmith-system,resources=configmaps,verbs=list;watch

// Catalog returns the catalog to price with and the SignalsCurrent verdict. Parsing the
// feed (about 1 MB) happens once per ConfigMap version, not once per class.
func (s *CostSignals) Catalog(ctx context.Context, c client.Reader) (*catalog.Catalog, signals.Freshness, error) {
	base, err := catalog.Load()
	if err != nil {
		return nil, signals.Freshness{}, err
	}
	if _, ok := base.Prices[s.Region]; !ok {
		return base, signals.Freshness{Status: "False", Reason: v1alpha1.ReasonMissing,
			Message: fmt.Sprintf("the catalog has no prices for region %s (it has %v): weights keep the preference order", s.Region, base.Regions())}, nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, s.ConfigMap, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, signals.Freshness{}, fmt.Errorf("getting signals ConfigMap %s: %w", s.ConfigMap, err)
		}
		return base, signals.Assess(nil, fmt.Sprintf("ConfigMap %s not found", s.ConfigMap), s.now(), s.MaxAge), nil
	}
	s.mu.Lock()
	if s.version != cm.ResourceVersion {
		s.version = cm.ResourceVersion
		s.parsed, s.parseErr = signals.FromConfigMap(cm, s.Region)
		s.overlaid = nil
		if s.parsed != nil {
			s.overlaid = s.parsed.Apply(base)
		}
	}
	parsed, overlaid, parseErr := s.parsed, s.overlaid, s.parseErr
	s.mu.Unlock()

	switch {
	case parseErr != nil:
		return base, signals.Freshness{Status: "False", Reason: v1alpha1.ReasonMissing, Message: parseErr.Error() + "; weights use the embedded catalog"}, nil
	case parsed == nil:
		return base, signals.Assess(nil, fmt.Sprintf("ConfigMap %s has no Linux data for %s", s.ConfigMap, s.Region), s.now(), s.MaxAge), nil
	}
	fresh := signals.Assess(parsed, "", s.now(), s.MaxAge)
	if fresh.Reason != v1alpha1.ReasonFresh {
		return base, fresh, nil
	}
	return overlaid, fresh, nil
}

func (s *CostSignals) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// setSignalsCondition reports the signals a cost strategy used; a Static class uses none.
func setSignalsCondition(wc *v1alpha1.WorkloadClass, f signals.Freshness, costBased bool) {
	if !costBased {
		meta.RemoveStatusCondition(&wc.Status.Conditions, v1alpha1.ConditionSignalsCurrent)
		return
	}
	setCondition(wc, v1alpha1.ConditionSignalsCurrent, metav1.ConditionStatus(f.Status), f.Reason, f.Message)
}

// requeueForStaleness brings the class back when fresh signals go stale, or when signals
// dated a little ahead of this clock come due, so the condition and the weights change
// without another event.
func requeueForStaleness(res ctrl.Result, f signals.Freshness, now time.Time) ctrl.Result {
	for _, at := range []time.Time{f.StaleAt, f.FreshAt} {
		if at.IsZero() {
			continue
		}
		after := at.Sub(now) + time.Second
		if res.RequeueAfter == 0 || after < res.RequeueAfter {
			res.RequeueAfter = after
		}
	}
	return res
}

// classesForSignals re-renders every class when the signals change.
func (r *WorkloadClassReconciler) classesForSignals(ctx context.Context, _ client.Object) []reconcile.Request {
	return listRequests(ctx, r, &v1alpha1.WorkloadClassList{})
}
