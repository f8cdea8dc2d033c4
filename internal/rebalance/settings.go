package rebalance

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// MaxQuietPeriod caps the quiet period's doubling on repeated failures.
const MaxQuietPeriod = 24 * time.Hour

// KarpenterICEMemory is how long Karpenter's AWS provider may remember an offering that
// failed for capacity, so no move is started sooner after a failure: its scheduling
// simulation keeps choosing around the offering for that long. The unavailable-offerings
// cache keeps an entry 3 minutes (UnavailableOfferingsTTL), but the offerings it computed
// stay cached until the cache's janitor, every 10 s (UnavailableOfferingsCleanupInterval),
// evicts the entry and bumps their sequence number; 5 s more covers the capacity-error
// event being recorded after the mark. A move started at exactly 3 minutes could meet
// the remembered failure, land on the fallback rung again and start a needless quiet
// period.
const KarpenterICEMemory = 3*time.Minute + 15*time.Second

// Settings are a class's resolved spec.rebalance.
type Settings struct {
	Policy          v1alpha1.RebalancePolicy
	MaxInterruption catalog.Bucket
	After           time.Duration
	MaxConcurrent   intstr.IntOrString
	QuietPeriod     time.Duration
}

// Resolve takes each field from the class, else the Baseline, else the default.
func Resolve(class, baseline *v1alpha1.Rebalance) (Settings, error) {
	layers := []*v1alpha1.Rebalance{class, baseline}
	pick := func(get func(*v1alpha1.Rebalance) bool) {
		for _, l := range layers {
			if l != nil && get(l) {
				return
			}
		}
	}
	s := Settings{Policy: v1alpha1.RebalanceOff, MaxConcurrent: intstr.FromInt32(v1alpha1.DefaultRebalanceMaxConcurrent)}
	bucket := v1alpha1.DefaultRebalanceMaxInterruption
	after, _ := time.ParseDuration(v1alpha1.DefaultRebalanceAfter)
	quiet, _ := time.ParseDuration(v1alpha1.DefaultRebalanceQuietPeriod)
	s.After, s.QuietPeriod = after, quiet
	pick(func(l *v1alpha1.Rebalance) bool { s.Policy = orElse(l.Policy, s.Policy); return l.Policy != "" })
	pick(func(l *v1alpha1.Rebalance) bool {
		bucket = orElse(l.MaxInterruption, bucket)
		return l.MaxInterruption != ""
	})
	pick(func(l *v1alpha1.Rebalance) bool {
		if l.After != nil {
			s.After = l.After.Duration
		}
		return l.After != nil
	})
	pick(func(l *v1alpha1.Rebalance) bool {
		if l.QuietPeriod != nil {
			s.QuietPeriod = l.QuietPeriod.Duration
		}
		return l.QuietPeriod != nil
	})
	pick(func(l *v1alpha1.Rebalance) bool {
		if l.MaxConcurrent != nil {
			s.MaxConcurrent = *l.MaxConcurrent
		}
		return l.MaxConcurrent != nil
	})
	s.MaxInterruption = catalog.BucketUnknown
	for b := catalog.BucketUnder5; b <= catalog.BucketOver20; b++ {
		if b.String() == bucket {
			s.MaxInterruption = b
		}
	}
	if s.MaxInterruption == catalog.BucketUnknown {
		return s, fmt.Errorf("spec.rebalance.maxInterruption: unknown bucket %q", bucket)
	}
	if s.QuietPeriod <= 0 {
		return s, fmt.Errorf("spec.rebalance.quietPeriod: must be positive")
	}
	return s, nil
}

func orElse[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Concurrent is how many nodes may be moving at once, given how many of the class's nodes
// run on fallback rungs (those moving included): maxConcurrent, or its percentage of
// them rounded up, at least 1.
func (s Settings) Concurrent(fallback int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&s.MaxConcurrent, fallback, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Quiet is the quiet period after failures failed moves in a row: QuietPeriod doubled
// for each failure after the first, up to MaxQuietPeriod.
func (s Settings) Quiet(failures int32) time.Duration {
	if failures < 1 {
		return 0
	}
	d := float64(s.QuietPeriod) * math.Pow(2, float64(failures-1))
	if d > float64(MaxQuietPeriod) {
		return MaxQuietPeriod
	}
	return time.Duration(d)
}

// CapacityWindow is how far back a rung's InsufficientCapacityError events count
// against moving to it: the quiet period, and at least Karpenter's own memory of them.
func (s Settings) CapacityWindow() time.Duration {
	return max(s.QuietPeriod, KarpenterICEMemory)
}
