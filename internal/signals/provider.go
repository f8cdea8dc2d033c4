package signals

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Provider is where the manager (and `poolsmith diff`) find spot signals and how they
// judge them: the signals ConfigMap, read through the caller's client, parsed once per
// version and laid over the embedded catalog.
type Provider struct {
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
	parsed   *Signals
	overlaid *catalog.Catalog
	parseErr error

	factsVersion string // resourceVersion of the ConfigMap whose commitments.json was last read
	facts        *CommitmentFacts
	factsErr     error
}

// +kubebuilder:rbac:groups="",namespace=poolsmith-system,resources=configmaps,verbs=list;watch

// Catalog returns the catalog to price with and the SignalsCurrent verdict. Parsing the
// feed (about 1 MB) happens once per ConfigMap version, not once per class.
func (s *Provider) Catalog(ctx context.Context, c client.Reader) (*catalog.Catalog, Freshness, error) {
	base, err := catalog.Load()
	if err != nil {
		return nil, Freshness{}, err
	}
	if _, ok := base.Prices[s.Region]; !ok {
		return base, Freshness{Status: "False", Reason: v1alpha1.ReasonMissing,
			Message: fmt.Sprintf("the catalog has no prices for region %s (it has %v): weights keep the preference order", s.Region, base.Regions())}, nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, s.ConfigMap, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, Freshness{}, fmt.Errorf("getting signals ConfigMap %s: %w", s.ConfigMap, err)
		}
		return base, Assess(nil, fmt.Sprintf("ConfigMap %s not found", s.ConfigMap), s.Clock(), s.MaxAge), nil
	}
	s.mu.Lock()
	if s.version != cm.ResourceVersion {
		s.version = cm.ResourceVersion
		s.parsed, s.parseErr = FromConfigMap(cm, s.Region)
		s.overlaid = nil
		if s.parsed != nil {
			s.overlaid = s.parsed.Apply(base)
		}
	}
	parsed, overlaid, parseErr := s.parsed, s.overlaid, s.parseErr
	s.mu.Unlock()

	switch {
	case parseErr != nil:
		return base, Freshness{Status: "False", Reason: v1alpha1.ReasonMissing, Message: parseErr.Error() + "; weights use the embedded catalog"}, nil
	case parsed == nil:
		return base, Assess(nil, fmt.Sprintf("ConfigMap %s has no Linux data for %s", s.ConfigMap, s.Region), s.Clock(), s.MaxAge), nil
	}
	fresh := Assess(parsed, "", s.Clock(), s.MaxAge)
	if fresh.Reason != v1alpha1.ReasonFresh {
		return base, fresh, nil
	}
	return overlaid, fresh, nil
}

// Clock is the time signals are judged at: Now, or the wall clock.
func (s *Provider) Clock() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Commitments reads the signals ConfigMap's commitments.json, once per ConfigMap version:
// nil facts when the ConfigMap or the key is absent (no export). invalid says why an
// export present could not be read: the caller leaves out what needed it and stalls
// nothing; err is a failure to read the ConfigMap at all.
func (s *Provider) Commitments(ctx context.Context, c client.Reader) (facts *CommitmentFacts, invalid error, err error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, s.ConfigMap, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("getting signals ConfigMap %s: %w", s.ConfigMap, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.factsVersion != cm.ResourceVersion || cm.ResourceVersion == "" {
		cat, err := catalog.Load()
		if err != nil {
			return nil, nil, err
		}
		s.factsVersion = cm.ResourceVersion
		s.facts, s.factsErr = CommitmentsFromConfigMap(cm, cat)
	}
	return s.facts, s.factsErr, nil
}
