// Package decode reads stored WorkloadClasses and Baselines into their Go types without
// letting one object that does not fit them blind the manager to the others.
//
// The decision: the manager's cache lists and watches these two kinds as JSON maps (the
// dynamic client, which decodes any number) and turns each item into its Go type on its
// own (Into). An item that does not fit, say a maxConcurrent of 2147483648 stored before
// the CRD bounded it, or written straight into etcd, still enters the cache, with its
// metadata, every top-level spec field that does decode, and AnnotationError saying which
// did not and why. The WorkloadClass controller reports such a class Synced=False
// InvalidSpec with that text and leaves its children exactly as they are; a class whose
// Baseline carries it says so the same way; the rebalance controller does nothing for
// either. With controller-runtime's typed list and watch, the same item fails the whole
// list (and every watch event after it), which stalls every class.
//
// Why not the alternatives: a lenient UnmarshalJSON on the API types would change every
// decoder of them (the CLI's among them, which must refuse such input); an unstructured
// cache would make every reader convert, in every controller. Here the cost is one JSON
// round trip per list item and watch event of these two kinds, and no request more: the
// dynamic client sends the same list and watch the typed one would.
package decode
