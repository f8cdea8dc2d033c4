package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Commitments are what this cluster may count on of the account's Savings Plans and
// Reserved Instances. While a commitment has room for a class, an on-demand rung whose
// types it covers costs nothing more per node (the commitment is paid whether used or
// not), so it ranks above spot; see docs/commitments.md. The family rules on family,
// discount.families and a Reserved Instance's instanceType are written into the CRD by
// `make manifests` (hack/crdfamilies) from the embedded instance catalog.
// +kubebuilder:validation:XValidation:rule="!has(self.allocations) || self.allocations.map(a, a.percent).sum() <= 100",message="allocations: percents add up to more than 100",fieldPath=".allocations"
type Commitments struct {
	// savingsPlans this cluster shares in. An entry may carry only id and share: the
	// facts it leaves out (type, commitment, family, region, start, end, and each type's
	// rate) come, field by field, from the signals ConfigMap's commitments.json, which
	// `poolsmith signals commitments` writes; a fact set here wins over the export's.
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=id
	// +optional
	SavingsPlans []SavingsPlan `json:"savingsPlans,omitempty"`

	// reservedInstances this cluster shares in (Linux/UNIX, default tenancy). As for
	// savingsPlans, an entry may carry only id and share and take its other facts from
	// commitments.json.
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=id
	// +optional
	ReservedInstances []ReservedInstance `json:"reservedInstances,omitempty"`

	// allocations split each commitment's share across the Baseline's classes: a class
	// matched by an entry (the first that matches) gets that percent of every share; the
	// rest is split equally among the teams of the classes no entry matches, a team being
	// the classes' poolsmith.dev/team label (the classes without one are one team
	// together), and equally among a team's classes.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Allocations []CommitmentAllocation `json:"allocations,omitempty"`
}

// SavingsPlanType is the kind of a Savings Plan.
// +kubebuilder:validation:Enum=Compute;EC2Instance
type SavingsPlanType string

// Savings Plan types.
const (
	// SavingsPlanCompute covers any family in any region.
	SavingsPlanCompute SavingsPlanType = "Compute"
	// SavingsPlanEC2Instance covers one instance family in one region.
	SavingsPlanEC2Instance SavingsPlanType = "EC2Instance"
)

// SavingsPlan is one Savings Plan, as far as this cluster counts on it.
// +kubebuilder:validation:XValidation:rule="!has(self.end) || !has(self.start) || self.end > self.start",message="end: must be after start",fieldPath=".end"
// +kubebuilder:validation:XValidation:rule="!has(self.end) || !has(self.start) || self.end - self.start <= duration('26328h')",message="end: a plan's term is at most 3 years",fieldPath=".end"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'EC2Instance' || has(self.family)",message="family: an EC2Instance plan names its instance family",fieldPath=".family"
// +kubebuilder:validation:XValidation:rule="!has(self.family) || (has(self.type) && self.type == 'EC2Instance')",message="family: only an EC2Instance plan has one; set type: EC2Instance",fieldPath=".family"
// +kubebuilder:validation:XValidation:rule="!has(self.share.hourly) || !has(self.commitment) || double(self.share.hourly) <= double(self.commitment)",message="share.hourly: more than the plan's commitment",fieldPath=".share.hourly"
type SavingsPlan struct {
	// id as AWS prints it (savingsPlanId), e.g. sp-0a1b2c3d.
	// +kubebuilder:validation:Pattern=`^[0-9a-z-]{1,64}$`
	// +required
	ID string `json:"id"`

	// type is Compute (any family, any region) or EC2Instance (one family in one region).
	// +optional
	Type SavingsPlanType `json:"type,omitempty"`

	// commitment is the plan's hourly commitment in US dollars, e.g. "12.50".
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,4}([.][0-9]{1,4})?$') && double(self) > 0.0 && double(self) <= 5000.0",message="commitment: US dollars per hour, more than 0 and at most 5000, with at most 4 decimals, e.g. 12.50"
	// +optional
	Commitment string `json:"commitment,omitempty"`

	// family of an EC2Instance plan, e.g. m7g: one of the instance catalog's families.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Family string `json:"family,omitempty"`

	// region of an EC2Instance plan, e.g. us-east-1. A Compute plan applies in every region.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Region string `json:"region,omitempty"`

	// discount off the on-demand price, for the types the plan covers.
	// +optional
	Discount *Discount `json:"discount,omitempty"`

	// start of the plan's term.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`

	// end of the plan's term. A plan whose end has passed is refused when the Baseline is
	// created (the chart's admission policy poolsmith-commitments); CEL has no clock, so
	// an update that adds one is admitted, and the renderer leaves the plan out.
	// +optional
	End *metav1.Time `json:"end,omitempty"`

	// share is this cluster's part of the commitment: hourly US dollars or a percent.
	// +required
	Share CommitmentShare `json:"share"`
}

// Discount is a Savings Plan's discount off on-demand: percent strings below 100, e.g.
// "31%" or "27.5%".
type Discount struct {
	// default applies to every family the plan covers that families does not name.
	// +kubebuilder:validation:MaxLength=6
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,2}([.][0-9]{1,2})?%$')",message="default: a percentage from 0% to 99.99%, e.g. 31% or 27.5%"
	// +optional
	Default string `json:"default,omitempty"`

	// families gives the discount of single families, e.g. [{family: m7g, discount: 31%}].
	// It is a list rather than a map so the API server can bound the check of each family
	// against the catalog (a map key has no length limit).
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=family
	// +optional
	Families []FamilyDiscount `json:"families,omitempty"`
}

// FamilyDiscount is a Savings Plan's discount for one instance family.
type FamilyDiscount struct {
	// family, e.g. m7g: one of the instance catalog's families.
	// +kubebuilder:validation:MaxLength=32
	// +required
	Family string `json:"family"`
	// discount off on-demand, e.g. "31%".
	// +kubebuilder:validation:MaxLength=6
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,2}([.][0-9]{1,2})?%$')",message="discount: a percentage from 0% to 99.99%, e.g. 31%"
	// +required
	Discount string `json:"discount"`
}

// CommitmentShare is this cluster's part of a commitment.
// +kubebuilder:validation:XValidation:rule="has(self.hourly) != has(self.percent)",message="share: exactly one of hourly and percent"
type CommitmentShare struct {
	// hourly US dollars of the commitment this cluster may use, e.g. "4.00" (Savings Plans
	// only).
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,4}([.][0-9]{1,4})?$') && double(self) > 0.0",message="hourly: US dollars per hour, more than 0, with at most 4 decimals, e.g. 4.00"
	// +optional
	Hourly string `json:"hourly,omitempty"`

	// percent of the commitment this cluster may use (of a Reserved Instance: of its
	// normalized units), 1 to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent *int32 `json:"percent,omitempty"`
}

// ReservedInstanceScope is where a Reserved Instance applies.
// +kubebuilder:validation:Enum=Region;AvailabilityZone
type ReservedInstanceScope string

// Reserved Instance scopes.
const (
	// RIScopeRegion is size-flexible within the family, in any zone of the region.
	RIScopeRegion ReservedInstanceScope = "Region"
	// RIScopeZone covers only its instance type, in its zone.
	RIScopeZone ReservedInstanceScope = "AvailabilityZone"
)

// ReservedInstance is one Reserved Instance purchase, as far as this cluster counts on it.
// +kubebuilder:validation:XValidation:rule="!has(self.scope) || self.scope != 'AvailabilityZone' || has(self.zone)",message="zone: a zonal Reserved Instance names its zone",fieldPath=".zone"
// +kubebuilder:validation:XValidation:rule="!has(self.end) || !has(self.start) || self.end > self.start",message="end: must be after start",fieldPath=".end"
// +kubebuilder:validation:XValidation:rule="!has(self.share.hourly)",message="share: a Reserved Instance's share is a percent of its normalized units",fieldPath=".share"
type ReservedInstance struct {
	// id as AWS prints it (ReservedInstancesId).
	// +kubebuilder:validation:Pattern=`^[0-9a-z-]{1,64}$`
	// +required
	ID string `json:"id"`

	// instanceType bought, e.g. m7g.large; its family must be one the instance catalog
	// knows.
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+\.[a-z0-9-]+$`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	InstanceType string `json:"instanceType,omitempty"`

	// count of instances bought.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	Count *int32 `json:"count,omitempty"`

	// scope is Region (size-flexible within the family) or AvailabilityZone (this type in
	// this zone). Region when unset.
	// +optional
	Scope ReservedInstanceScope `json:"scope,omitempty"`

	// zone of an AvailabilityZone Reserved Instance, e.g. us-east-1a.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Zone string `json:"zone,omitempty"`

	// effectiveHourly is the amortized US dollars per hour of one instance (upfront over
	// the term's hours plus the hourly charges), e.g. "0.0646".
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,4}([.][0-9]{1,6})?$') && double(self) > 0.0 && double(self) <= 5000.0",message="effectiveHourly: US dollars per hour, more than 0 and at most 5000, e.g. 0.0646"
	// +optional
	EffectiveHourly string `json:"effectiveHourly,omitempty"`

	// start of the term.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`

	// end of the term; see SavingsPlan's end.
	// +optional
	End *metav1.Time `json:"end,omitempty"`

	// share is this cluster's percent of the instances' normalized units.
	// +required
	Share CommitmentShare `json:"share"`
}

// CommitmentAllocation gives the classes a selector matches a percent of each share.
type CommitmentAllocation struct {
	// classSelector matches WorkloadClasses by label (a team label, say).
	// +required
	ClassSelector metav1.LabelSelector `json:"classSelector"`

	// percent of each commitment's share the matched classes get together, split equally
	// among them.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +required
	Percent int32 `json:"percent"`
}

// CommitmentUse is whether a class's rungs are ranked by committed prices.
// +kubebuilder:validation:Enum=Use;Ignore
type CommitmentUse string

// Commitment uses.
const (
	// CommitmentsUse ranks the class's rungs by the committed price (the default).
	CommitmentsUse CommitmentUse = "Use"
	// CommitmentsIgnore prices the class at list prices and gives up its entitlement.
	CommitmentsIgnore CommitmentUse = "Ignore"
)

// Commitment states in status.commitments[].state.
const (
	// CommitmentOpen: the commitment has room for the class's next node, so the rungs it
	// covers rank by its price.
	CommitmentOpen = "Open"
	// CommitmentExhausted: less than one node of room was left; the class's rungs rank at
	// list prices until two nodes of room have held for the manager's
	// --commitment-open-dwell.
	CommitmentExhausted = "Exhausted"
	// CommitmentIgnored: the class sets spec.weighting.commitments: Ignore.
	CommitmentIgnored = "Ignored"
)

// Commitment kinds in status.commitments[].kind.
const (
	CommitmentKindSavingsPlan      = "SavingsPlan"
	CommitmentKindReservedInstance = "ReservedInstance"
)

// ClassCommitmentStatus is one of the Baseline's commitments as it applies to the class:
// its part of the share, how much of it the class's nodes use, and the state that ranks
// the class's rungs. Figures are US dollars per hour for a Savings Plan ("$0.6000/h") and
// normalized units for a Reserved Instance ("8 units"). See docs/commitments.md.
type ClassCommitmentStatus struct {
	// id of the Savings Plan or Reserved Instance.
	ID string `json:"id"`
	// kind is SavingsPlan or ReservedInstance.
	Kind string `json:"kind"`
	// state is Open, Exhausted or Ignored.
	// +optional
	State string `json:"state,omitempty"`
	// since is when the state last changed.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// openPendingSince is when an Exhausted commitment first had two nodes of room in the
	// current stretch; it opens once that has held for the dwell.
	// +optional
	OpenPendingSince *metav1.Time `json:"openPendingSince,omitempty"`
	// entitlement is the class's part of this cluster's share.
	// +optional
	Entitlement string `json:"entitlement,omitempty"`
	// used is what the class's nodes draw from its entitlement.
	// +optional
	Used string `json:"used,omitempty"`
	// usedRatio is used over entitlement, from 0 to 1, e.g. "0.375".
	// +optional
	UsedRatio string `json:"usedRatio,omitempty"`
	// nodes the commitment covers, wholly or in part.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// rungs the commitment priced (ranked by a committed price) in the last render.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Rungs []string `json:"rungs,omitempty"`
}

// BaselineCommitmentStatus is one commitment for the whole Baseline: this cluster's share
// and what all its classes' nodes draw from it, in AWS's order of application.
type BaselineCommitmentStatus struct {
	// id of the Savings Plan or Reserved Instance.
	ID string `json:"id"`
	// kind is SavingsPlan or ReservedInstance.
	Kind string `json:"kind"`
	// share is this cluster's part of the commitment.
	// +optional
	Share string `json:"share,omitempty"`
	// used is what the Baseline's classes' nodes draw from the share.
	// +optional
	Used string `json:"used,omitempty"`
	// usedRatio is used over share, from 0 to 1.
	// +optional
	UsedRatio string `json:"usedRatio,omitempty"`
	// nodes the commitment covers, wholly or in part.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// end is when the commitment ends, if declared.
	// +optional
	End *metav1.Time `json:"end,omitempty"`
	// leftOut says why the manager prices nothing with this entry (it has ended, or lacks
	// the facts to price), naming the field; empty for an entry in use.
	// +optional
	LeftOut string `json:"leftOut,omitempty"`
}
