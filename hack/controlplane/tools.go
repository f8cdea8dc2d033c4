//go:build tools

// Package controlplane pins the Kubernetes control-plane binaries that the test suite and
// `make demo` run: kube-apiserver and kubectl for every suite, and kube-scheduler and
// kube-controller-manager for the end-to-end suite (test/e2e), where Karpenter provisions
// only for pods the scheduler marks unschedulable and the controller manager runs
// Deployments, garbage collection and disruption budgets. All are built from
// k8s.io/kubernetes source because the envtest download site is not reachable from our
// build machines. It is its own module so the main go.mod never requires k8s.io/kubernetes.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
