// Package validate checks objects against CRDs in-process, through kube-apiserver's own
// custom-resource code: the OpenAPI schema, metadata name rules, list-type invariants,
// defaults and CEL rules within the server's cost budget, including transition rules and
// ratcheting against the live object on update. strategy.go composes these from the
// packages k8s.io/apiextensions-apiserver's registry strategy composes, without importing
// the registry (which links the apiserver's storage and the etcd client into the binary;
// a test in this package fails if any of them returns). The controller validates every
// object a plan would write before the first write; the CLI validates its inputs against
// Poolsmith's CRDs and its outputs against Karpenter's, so both refuse what the cluster
// would refuse. It is pure: no client, no I/O beyond the embedded CRDs.
//
// The admission policies Poolsmith renders (admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicy, MutatingAdmissionPolicy and their bindings) are built-in
// kinds, not CRDs, and their full validation lives in k8s.io/kubernetes, which is not
// imported: they are decoded strictly, their names and required fields checked, and every
// CEL expression compiled with kube-apiserver's own compiler (k8s.io/apiserver); the API
// server judges the rest at write time (policy.go). Judge evaluates an access policy on a
// pod with the API server's cost model and budget.
package validate
