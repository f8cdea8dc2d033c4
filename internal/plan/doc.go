// Package plan computes what bringing a class's children in line with its render takes:
// for each child create, update (with the changed fields, the foreign fields removed and
// whether Karpenter will drift its nodes), unchanged or conflict, and for children no
// longer rendered delete, retire or orphan by prunePolicy. It is pure. The controller
// carries a plan out; `poolsmith diff` prints it; both build its input the same way
// (internal/observe), so what diff shows is what the next reconcile writes.
//
// Poolsmith owns a generated child's spec whole: an update replaces it, so a field the
// render does not produce (a hand-added taint, a template annotation) is removed. Object
// metadata is merged, not replaced: Karpenter keeps its hash annotations and finalizers
// there.
package plan
