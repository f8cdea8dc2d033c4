// Package controllers holds Poolsmith's reconcilers. The WorkloadClass reconciler reads
// top to bottom: get the class, handle deletion, resolve its Baseline, render (the pure
// internal/render), plan (internal/plan), validate every write in-process
// (internal/validate), then create or update the children whole or not at all, prune
// rungs no longer rendered, and write status once: the pass returns an outcome, and one
// function, setStatus, turns it and the pass's error into every condition and status
// field (docs/controller.md). The rebalance reconciler
// carries out spec.rebalance with the pure decider in internal/rebalance
// (docs/rebalance.md). The Baseline reconciler counts the classes that reference each
// Baseline.
package controllers
