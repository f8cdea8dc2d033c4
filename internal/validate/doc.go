// Package validate checks objects against CRDs in-process, through kube-apiserver's own
// custom-resource code (k8s.io/apiextensions-apiserver's registry strategy): the OpenAPI
// schema, metadata name rules, list-type invariants, defaults and CEL rules, including
// transition rules against the live object on update. The controller validates every
// object a plan would write before the first write; the CLI validates its inputs against
// Poolsmith's CRDs and its outputs against Karpenter's, so both refuse what the cluster
// would refuse. It is pure: no client, no I/O beyond the embedded CRDs.
package validate
