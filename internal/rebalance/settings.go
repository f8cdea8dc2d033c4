package rebalance

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/poolsmith/poolsmith/internal/render"
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

// Settings are a class's resolved spec.rebalance. The renderer resolves them (the class,
// else its Baseline, else the defaults: render.Resolve, render.Result.Settings); the
// decider only reads them, as rebalance.Settings(settings.Rebalance).
type Settings render.Rebalance

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
