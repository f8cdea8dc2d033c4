// Package rebalance moves a WorkloadClass's nodes from fallback rungs back up its ladder
// when the preferred rung can be expected to launch (spec.rebalance). Deciding is pure
// (Settings, Decide, Settle, the evidence helpers) and tested without a cluster; the
// settings it decides with are resolved by the renderer (render.Resolve), the one place
// class-over-Baseline-over-default precedence is written; the
// RebalanceReconciler in controllers/ reads the cluster, marks the chosen NodeClaims
// drifted and writes status.rebalance.
//
// The mechanism is Karpenter's own static drift: a NodeClaim whose
// karpenter.sh/nodepool-hash annotation differs from its NodePool's (with the same
// karpenter.sh/nodepool-hash-version) is Drifted, and Karpenter's disruption controller
// replaces it, launching the replacement first, within the NodePool's disruption budgets,
// and evicting pods through their PodDisruptionBudgets. The replacement goes where
// Karpenter's scheduling simulation puts it: the highest-weight NodePool that can launch.
// The alternatives are not graceful: a Drifted condition set from outside is cleared by
// Karpenter's drift controller, and deleting a NodeClaim ignores disruption budgets and
// cordons the node even when do-not-disrupt pods run on it.
//
// Drift is Karpenter's "eventual" disruption: when the NodeClaim has a
// terminationGracePeriod, Karpenter disrupts it even past do-not-disrupt pods and
// blocking PDBs. So Poolsmith checks both itself before marking a node, and removes the
// mark (restoring the hash) if a blocker appears before Karpenter starts draining it.
package rebalance
