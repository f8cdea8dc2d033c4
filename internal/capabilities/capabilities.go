// Package capabilities is what the cluster serves and what the operator enables, as one
// value: built once, by the operator at start (its flags, then discovery) or by the CLI
// (its flags), and passed down unchanged to the reconcilers, observe and the renderer, in
// the spirit of Karpenter's FeatureGates options. A new switch (CapacityBuffer, ...) is a
// field here, not a parameter threaded through every layer.
//
// The zero value is the default manager: AccessRules written, namespace defaults applied,
// no NodeOverlays.
package capabilities

import (
	"strings"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Capabilities says which optional children a class may render and which admission
// policies enforce what it renders.
type Capabilities struct {
	// NodeOverlays lets classes render NodeOverlays (weighting.nodeOverlays): the manager's
	// --node-overlays, which needs Karpenter's NodeOverlay CRD and feature gate. Without
	// it, a class that asks for overlays is refused (InvalidSpec) and none is cached.
	NodeOverlays bool
	// NoAccessPolicies is the manager's --access-policies=false: no AccessRule is rendered,
	// cached, written or pruned, so spec.access and namespace defaults are not enforced.
	NoAccessPolicies bool
	// NoDefaultPolicies: the API server does not serve MutatingAdmissionPolicy, so the
	// chart installs no namespace-default policy (the Access condition says so).
	// Discovered by the operator, never set by a flag.
	NoDefaultPolicies bool
	// Headroom is the mechanism a class's spec.headroom gets (the manager's --headroom,
	// auto resolved at start by internal/operator): CapacityBuffer, Pods, or Off (empty
	// counts as Off): then no headroom child is rendered, cached, written or pruned, and
	// classes report status.headroom.reason Disabled. A class may still ask for Pods; one
	// that asks for CapacityBuffer where this is Pods falls back to Pods, reported.
	Headroom v1alpha1.HeadroomMechanism
	// HeadroomReason says in words why Headroom is what it is (what auto found, or the
	// flag), for the MechanismFallback message; HeadroomWhy has the default.
	HeadroomReason string
	// HeadroomBuffers: the cluster serves CapacityBuffers (discovery), so the manager
	// caches, watches and prunes the classes' CapacityBuffers and PodTemplates whichever
	// mechanism it uses, and a switch to Pods removes what CapacityBuffer left.
	HeadroomBuffers bool
	// HeadroomNamespace holds the headroom children (--headroom-namespace); default
	// v1alpha1.DefaultHeadroomNamespace.
	HeadroomNamespace string
}

// HeadroomOn reports whether headroom children are rendered, cached and written.
func (c Capabilities) HeadroomOn() bool {
	return c.Headroom != "" && c.Headroom != v1alpha1.HeadroomOff
}

// HeadroomWhy is HeadroomReason, or what the mechanism itself says.
func (c Capabilities) HeadroomWhy() string {
	if c.HeadroomReason != "" {
		return c.HeadroomReason
	}
	return "the manager runs with --headroom=" + strings.ToLower(string(c.Headroom))
}

// HeadroomNamespaceOrDefault is HeadroomNamespace, or the default.
func (c Capabilities) HeadroomNamespaceOrDefault() string {
	if c.HeadroomNamespace == "" {
		return v1alpha1.DefaultHeadroomNamespace
	}
	return c.HeadroomNamespace
}

// AccessRules reports whether classes render, and the manager keeps, AccessRules.
func (c Capabilities) AccessRules() bool { return !c.NoAccessPolicies }
