package operator

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// stoppableCache is the manager's cache, whose WaitForCacheSync also returns true once
// stop (the context New was given, which its callers start the manager with) is done.
// controller-runtime v0.25's manager starts nothing else until its cache syncs, and if it
// is stopped first (RBAC refuses a list, so the cache never syncs) its Start neither
// returns nor rests: it loops on the done context, a core busy, until the cache reports
// (kubernetes-sigs/controller-runtime#3440). Reporting at stop lets Start go on to its
// stop procedure and return.
type stoppableCache struct {
	cache.Cache
	stop <-chan struct{}
}

func (c stoppableCache) WaitForCacheSync(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if c.Cache.WaitForCacheSync(ctx) {
		return true
	}
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}
