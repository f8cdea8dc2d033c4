// Package fakekubelet stands in for the kubelet (and the bits of kube-controller-manager
// that act on nodes) on every node Karpenter launches in the simulated EC2 account, where
// no machine exists to run one:
//
//   - it registers a Node for each launched NodeClaim, with the NodeClaim's labels,
//     taints, capacity and allocatable, its providerID and Karpenter's unregistered taint,
//     as a kubelet started with Karpenter's user data would;
//   - it reports the Node Ready (again on a later pass when that post lost a race to a
//     concurrent write) and removes the node.kubernetes.io/not-ready taint that the API
//     server adds at registration (the node-lifecycle controller's job, which the suite
//     does not run because it would mark these kubelet-less nodes unreachable), and
//     removes the NodeClaim's startup taints, as the agent that owns them would;
//   - it reports pods bound to its nodes Running, DaemonSet pods (which the DaemonSet
//     controller creates and kube-scheduler binds) included, and finishes the deletion of
//     pods that are terminating on its nodes or bound to nodes that no longer exist;
//   - it refuses, as the kubelet's admission does, a pod whose nodeSelector or required
//     node affinity does not match its node (reason NodeAffinity) or that does not
//     tolerate every NoExecute taint of its node (reason TaintToleration), however the
//     pod was placed there (the scheduler, or spec.nodeName): the pod is reported Failed
//     (Admit).
//
// It polls the API server; the nodes it registers carry the annotation Annotation.
package fakekubelet
