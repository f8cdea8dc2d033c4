// Package localcluster runs a whole Karpenter cluster in one process, with no cloud: the
// end-to-end suite (test/e2e) and `make demo` start it.
//
// What is real: kube-apiserver and etcd (internal/testenv) with Poolsmith's and Karpenter's
// CRDs; kube-scheduler, which binds pods and marks the ones that fit nowhere Unschedulable
// (the only pods Karpenter provisions for); kube-controller-manager with the garbage
// collector (NodeClaims die with their NodePool), the ReplicaSet and Deployment
// controllers (workloads are Deployments and evicted pods come back), the DaemonSet,
// StatefulSet, CronJob and ReplicationController controllers, and the disruption
// controller (PodDisruptionBudgets report what they allow), each acting as its own
// service account (--use-service-account-credentials, as on EKS); Karpenter v1.15.0's operator
// with its AWS cloud provider and every core and AWS controller, wired as the provider's
// cmd/controller/main.go wires them; and Poolsmith's manager.
//
// What is simulated: EC2 (internal/fakeec2: the provider's fake AWS APIs, fed from
// Poolsmith's catalog) and the kubelet of every launched node (internal/fakekubelet).
//
// Karpenter's operator registers global metrics, reads its flags from os.Args and its
// configuration from the environment, and panics when its manager fails: a process runs
// one cluster, once. kube-scheduler and kube-controller-manager are the binaries
// hack/envtest.sh builds beside kube-apiserver in KUBEBUILDER_ASSETS.
package localcluster
