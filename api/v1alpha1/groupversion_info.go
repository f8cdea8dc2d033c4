// Package v1alpha1 holds the poolsmith.dev/v1alpha1 API: Baseline, what every node of the
// cluster must have, and WorkloadClass, what one kind of workload needs. Poolsmith renders
// each WorkloadClass, on top of its Baseline, into one Karpenter EC2NodeClass and a ladder
// of NodePools.
//
// +kubebuilder:object:generate=true
// +groupName=poolsmith.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Poolsmith API.
	GroupVersion = schema.GroupVersion{Group: "poolsmith.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Poolsmith types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Poolsmith types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
