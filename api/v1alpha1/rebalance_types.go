package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RebalancePolicy says whether Poolsmith moves nodes back up a class's ladder.
// +kubebuilder:validation:Enum=Off;Preferred
type RebalancePolicy string

const (
	// RebalanceOff never moves a node (the default: an upgrade never starts replacing nodes).
	RebalanceOff RebalancePolicy = "Off"
	// RebalancePreferred moves nodes from a fallback rung to the highest rung that can
	// take them, through Karpenter's drift replacement.
	RebalancePreferred RebalancePolicy = "Preferred"
)

// Rebalance defaults, used when neither the class nor its Baseline sets a field.
const (
	DefaultRebalanceMaxInterruption = "10-15%"
	DefaultRebalanceAfter           = "30m"
	DefaultRebalanceQuietPeriod     = "1h"
	DefaultRebalanceMaxConcurrent   = 1
)

// Rebalance moves nodes that fell back to a lower rung (spot unavailable, on-demand
// launched) back to the preferred rung once it can be expected to launch. Each move goes
// through Karpenter's own drift replacement: the replacement is launched first, pods are
// evicted through their PodDisruptionBudgets, and the rung's disruption budgets and
// karpenter.sh/do-not-disrupt are honoured. A class's fields override its Baseline's, one
// by one.
type Rebalance struct {
	// policy is Off (the default) or Preferred.
	// +optional
	Policy RebalancePolicy `json:"policy,omitempty"`

	// maxInterruption is the highest Spot Instance Advisor interruption bucket of the
	// preferred rung's instance types at which a move to a spot rung is allowed: <5%,
	// 5-10%, 10-15% (the default), 15-20% or >20%. The signals must be fresh.
	// +kubebuilder:validation:Enum="<5%";"5-10%";"10-15%";"15-20%";">20%"
	// +optional
	MaxInterruption string `json:"maxInterruption,omitempty"`

	// after is how long a node must have run on a lower rung before it may move, e.g.
	// 30m (the default).
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration of at most 2562047h (the longest Go can hold)"
	// +kubebuilder:validation:Type="string"
	// +optional
	After *metav1.Duration `json:"after,omitempty"`

	// maxConcurrent is how many of the class's nodes may be moving at once: a number, or
	// a percentage of the class's nodes on fallback rungs (rounded up). Default 1. A number
	// is at most 2147483647, what its Go type (int32) holds.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 && self <= 2147483647 : self.matches('^([1-9][0-9]?|100)%$')",message="must be a number from 1 to 2147483647 or a percentage from 1% to 100%"
	// +optional
	MaxConcurrent *intstr.IntOrString `json:"maxConcurrent,omitempty"`

	// quietPeriod is how long no node of the class moves after a failed move (its
	// replacement landed on a fallback rung again, or did not launch), e.g. 1h (the
	// default). It doubles with each failure in a row, up to 24h.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration of at most 2562047h (the longest Go can hold)"
	// +kubebuilder:validation:Type="string"
	// +optional
	QuietPeriod *metav1.Duration `json:"quietPeriod,omitempty"`
}

// RebalanceStatus reports the moves of a class's nodes back up its ladder.
type RebalanceStatus struct {
	// fallbackNodes is how many of the class's nodes run on a rung below the top one.
	// +optional
	FallbackNodes int32 `json:"fallbackNodes,omitempty"`
	// oldestFallback is when the longest-running of those nodes was created.
	// +optional
	OldestFallback *metav1.Time `json:"oldestFallback,omitempty"`
	// moving are the moves in progress.
	// +listType=map
	// +listMapKey=nodeClaim
	// +optional
	Moving []RebalanceMove `json:"moving,omitempty"`
	// started, succeeded and failed count moves since the class was created. A move
	// succeeds when the replacement lands on a higher rung, and fails when it lands on a
	// fallback rung again.
	// +optional
	Started int64 `json:"started,omitempty"`
	// +optional
	Succeeded int64 `json:"succeeded,omitempty"`
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// failuresInARow is how many moves failed since the last success; the quiet period
	// doubles with each.
	// +optional
	FailuresInARow int32 `json:"failuresInARow,omitempty"`
	// quietUntil is when moves may start again after a failure.
	// +optional
	QuietUntil *metav1.Time `json:"quietUntil,omitempty"`
	// lastFailure says why the last failed move failed: where its replacement landed, or
	// that it did not finish in time. The quiet period is its consequence.
	// +optional
	LastFailure string `json:"lastFailure,omitempty"`
	// message says what the last pass decided and why, e.g. which evidence is missing or
	// what blocks a node.
	// +optional
	Message string `json:"message,omitempty"`
}

// RebalanceMove is one node being moved up the ladder.
type RebalanceMove struct {
	// nodeClaim is the NodeClaim being replaced.
	NodeClaim string `json:"nodeClaim"`
	// from is the rung it runs on.
	From string `json:"from"`
	// to is the highest rung that can take its pods, where the move should land.
	To string `json:"to"`
	// started is when Poolsmith marked it for replacement.
	Started metav1.Time `json:"started"`
	// originalHash is the NodeClaim's karpenter.sh/nodepool-hash before Poolsmith marked
	// it; a cancelled move restores it. Kept here, where only Poolsmith writes, and not on
	// the NodeClaim, so a hand-set value cannot be written back as the hash.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	OriginalHash string `json:"originalHash,omitempty"`
}

// Rebalance marks and event reasons.
const (
	// AnnotationRebalanceHash on a NodeClaim held its karpenter.sh/nodepool-hash from
	// before the mark in earlier releases. It is no longer written nor read (the original
	// hash is in status.rebalance.moving[].originalHash); unmarking removes it.
	AnnotationRebalanceHash = "poolsmith.dev/rebalance-hash"
	// RebalanceDriftHash is the karpenter.sh/nodepool-hash a NodeClaim being moved carries.
	RebalanceDriftHash = "poolsmith-rebalance"

	// ReasonRebalanceStarted (Normal event): a node was marked for replacement.
	ReasonRebalanceStarted = "RebalanceStarted"
	// ReasonRebalanceSucceeded (Normal event): its replacement landed on a higher rung.
	ReasonRebalanceSucceeded = "RebalanceSucceeded"
	// ReasonRebalanceFailed (Warning event): its replacement landed on a fallback rung
	// again, or the move did not finish in time; moves stop for the quiet period.
	ReasonRebalanceFailed = "RebalanceFailed"
	// ReasonRebalanceCancelled (Normal event): a blocker appeared before Karpenter began
	// draining the node; its mark was removed.
	ReasonRebalanceCancelled = "RebalanceCancelled"
)
