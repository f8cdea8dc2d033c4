package rebalance_test

import (
	"testing"

	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"

	"github.com/poolsmith/poolsmith/internal/rebalance"
)

// Karpenter's memory of a capacity failure lasts until its cache's janitor evicts the
// entry, not only its TTL: a move started before then meets the failure again.
func TestKarpenterICEMemoryCoversTheProvidersCacheAndItsCleanup(t *testing.T) {
	if least := awscache.UnavailableOfferingsTTL + awscache.UnavailableOfferingsCleanupInterval; rebalance.KarpenterICEMemory < least {
		t.Fatalf("KarpenterICEMemory = %s, shorter than the provider's TTL plus cleanup interval (%s)", rebalance.KarpenterICEMemory, least)
	}
}
