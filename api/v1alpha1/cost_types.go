package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CostStatus is what the class's nodes cost now, in US dollars per hour, from the
// NodeClaims it holds: each launched NodeClaim priced by its own instance type and capacity
// type through the same priced catalog the weights use (the embedded catalog with the
// spot signals laid over it). Amounts are decimal strings rounded to a hundredth of a
// cent, e.g. "1.2345". See docs/cost.md.
type CostStatus struct {
	// perHour is the cost of every launched NodeClaim of the class, per hour.
	PerHour string `json:"perHour"`
	// fallbackPremiumPerHour is what the class's nodes on rungs below its preferred one
	// (the highest weight) cost above the same capacity on the preferred rung: the same
	// instance type where that rung allows it, else the cheapest type it allows with at
	// least as many vCPUs, as much memory and as many GPUs. Negative when the fallback is
	// the cheaper one.
	// +optional
	FallbackPremiumPerHour string `json:"fallbackPremiumPerHour,omitempty"`
	// effectivePerHour is perHour with the part of each node a Savings Plan or Reserved
	// Instance covers at the commitment's rate (the amortized figure showback uses; a
	// budget is judged on it); set only when the class's Baseline declares commitments.
	// +optional
	EffectivePerHour string `json:"effectivePerHour,omitempty"`
	// unusedEntitlementPerHour is the class's part of its Baseline's commitments that its
	// nodes leave unused: paid for whether used or not.
	// +optional
	UnusedEntitlementPerHour string `json:"unusedEntitlementPerHour,omitempty"`
	// idlePerHour is the part of perHour paid for capacity no pod requests: each node's
	// price times the share of its allocatable CPU, memory or GPUs (the most used of them)
	// that its pods do not request.
	// +optional
	IdlePerHour string `json:"idlePerHour,omitempty"`
	// rungs break the figures down by rung and capacity type.
	// +listType=map
	// +listMapKey=rung
	// +listMapKey=capacityType
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Rungs []RungCost `json:"rungs,omitempty"`
	// unpriced says which NodeClaims are not counted and why: not launched yet (no
	// instance type), or a type the catalog has no price for in the region.
	// +optional
	Unpriced string `json:"unpriced,omitempty"`
	// monthToDate is the estimated cost of the class since the start of month (UTC): the
	// cost per hour accumulated over time by the manager and kept here, so it survives a
	// restart. Time the manager did not run is counted at the last rate it wrote.
	// +optional
	MonthToDate string `json:"monthToDate,omitempty"`
	// month is the month monthToDate is for, e.g. 2026-12.
	// +optional
	Month string `json:"month,omitempty"`
	// accumulatedAt is when monthToDate was last brought up to date.
	// +optional
	AccumulatedAt *metav1.Time `json:"accumulatedAt,omitempty"`
}

// RungCost is what the class's nodes on one rung, of one capacity type, cost per hour.
type RungCost struct {
	// rung is the NodePool the NodeClaims were launched from.
	Rung string `json:"rung"`
	// capacityType is the NodeClaims' karpenter.sh/capacity-type: spot, on-demand or
	// reserved.
	CapacityType string `json:"capacityType"`
	// nodes is how many priced NodeClaims the figures are over.
	Nodes int32 `json:"nodes"`
	// perHour is their cost per hour.
	PerHour string `json:"perHour"`
	// fallbackPremiumPerHour is what they cost above the same capacity on the preferred
	// rung; empty on the preferred rung.
	// +optional
	FallbackPremiumPerHour string `json:"fallbackPremiumPerHour,omitempty"`
	// idlePerHour is the part of perHour no pod requests.
	// +optional
	IdlePerHour string `json:"idlePerHour,omitempty"`
	// effectivePerHour is perHour with covered parts at the commitments' rates; set only
	// when the class's Baseline declares commitments.
	// +optional
	EffectivePerHour string `json:"effectivePerHour,omitempty"`
	// priceSources name where their prices came from, with how many NodeClaims each
	// priced, e.g. "advisor 2026-11-30 (2), catalog 2025-05-28 (1)".
	// +optional
	PriceSources string `json:"priceSources,omitempty"`
}

// BudgetMode says what reaching a budget does.
// +kubebuilder:validation:Enum=Enforce;Warn
type BudgetMode string

const (
	// BudgetEnforce holds the class's rungs at what they use when it reaches its budget,
	// so Karpenter launches nothing more for it (the default).
	BudgetEnforce BudgetMode = "Enforce"
	// BudgetWarn only reports it: the BudgetExceeded condition, an event and the metric.
	BudgetWarn BudgetMode = "Warn"
)

// Budget caps what a class may cost per hour. When status.cost reaches perHour, each
// rung's limits are frozen at its NodePool's status.resources, so Karpenter launches no
// new node for the class (nor a replacement first: drift and replace-consolidation
// wait), and rebalance moves are suspended; BudgetExceeded says so. The hold is lifted
// once the class costs less again. See docs/cost.md for the overshoot bounds.
type Budget struct {
	// perHour is the most the class may cost, US dollars per hour, e.g. "12.50": above 0,
	// at most 4 decimals.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('-')",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="self.startsWith('-') || self.matches('^[0-9]{1,7}([.][0-9]{1,4})?$')",message="must be US dollars per hour as a decimal number with at most 4 decimals, e.g. 12.50"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9.]+$') || self.matches('[1-9]')",message="must be above 0: a budget of 0 would hold every rung at what it uses; remove spec.budget for none"
	PerHour string `json:"perHour"`
	// mode is Enforce (the default: hold the rungs) or Warn (report only).
	// +optional
	Mode BudgetMode `json:"mode,omitempty"`
}
