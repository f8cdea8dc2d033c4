// Package e2e holds the end-to-end suite: Karpenter v1.15.0's real operator, AWS cloud
// provider and controllers, kube-scheduler, kube-controller-manager and Poolsmith's
// manager on one local API server (internal/harness/localcluster), with EC2 and the kubelet
// simulated. Each scenario asserts what Karpenter did with the ladders Poolsmith wrote:
// which rung its NodeClaims came from, at which capacity type, architecture and family.
//
// Run it with `make e2e` (also part of .ci/run): `ginkgo -p --procs $(E2E_PROCS)`, so
// scenarios run side by side, most of their time being spent waiting on Karpenter.
// Karpenter's operator runs once per process, so Ginkgo process 1 starts the one cluster
// (SynchronizedBeforeSuite) and serves what lives only in its memory (the simulated EC2
// account, Karpenter's memory of failed offerings, its metrics) on a loopback endpoint;
// every process reaches the cluster through the package variable cluster: Client,
// Cloud.SetAvailable/Launches/Region/Zones/Types, ForgetCapacityErrors and disruptions.
// Process 1 stops the cluster after every process is done and prints each scenario's
// time and the suite's wall time. A plain `go test -tags e2e ./test/e2e/` still runs
// everything in one process, one scenario after another.
//
// A scenario in a file of its own joins by declaring a top-level Describe in this
// package (build tag e2e) and using the fixtures (create, workloadClass, deployment, ...)
// and cluster; nothing registers it. Because it may run beside any other scenario, it
// must:
//   - use class, Baseline, Deployment and other object names no other scenario uses, and
//     select its nodes by its class (pods with no class nodeSelector may land anywhere);
//   - switch capacity off only for instance types no parallel scenario can launch at that
//     capacity type (see DefaultTypes in internal/harness/localcluster and the families each
//     scenario pins), switch it back on in DeferCleanup, and flush Karpenter's memory of
//     the failures (cluster.ForgetCapacityErrors) only where the scenario does not prove
//     what Karpenter does with that memory (docs/karpenter-in-the-loop.md lists which do);
//   - give a DaemonSet a nodeSelector on its own class: Karpenter adds the requests of every
//     DaemonSet that could run on a NodeClaim to it, so an unselective one would resize
//     every parallel scenario's nodes (the sample node agents run only in the Serial
//     agreement scenario);
//   - add spot signals through freshSignals, which shares the one signals ConfigMap,
//     rather than writing it whole;
//   - read only its own objects, NodeClaims, launches (by its NodePools' tag) and events.
//
// A scenario that cannot (it lists every pod or NodeClaim of the cluster, writes a
// cluster-wide object such as the whole signals ConfigMap, or needs the in-process
// cluster, cluster.Local) is decorated Serial: Ginkgo runs Serial scenarios in process 1
// after every parallel one. One that waits minutes gets SpecPriority(10) so it starts
// first and the short ones fill the other processes meanwhile.
package e2e
