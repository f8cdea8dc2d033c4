// Package e2e holds the end-to-end suite: Karpenter v1.15.0's real operator, AWS cloud
// provider and controllers, kube-scheduler, kube-controller-manager and Poolsmith's
// manager on one local API server (internal/localcluster), with EC2 and the kubelet
// simulated. Each scenario asserts what Karpenter did with the ladders Poolsmith wrote:
// which rung its NodeClaims came from, at which capacity type, architecture and family.
//
// Run it with `make e2e` (also part of .ci/run). It starts one cluster for the whole
// suite: Karpenter's operator runs once per process.
package e2e
