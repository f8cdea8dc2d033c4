// Package controllers holds Poolsmith's reconcilers. The WorkloadClass reconciler reads
// top to bottom: get the class, handle deletion, resolve its Baseline, render (the pure
// internal/render), apply the children with server-side apply, prune rungs no longer
// rendered, and write status once. The Baseline reconciler counts the classes that
// reference each Baseline.
package controllers
