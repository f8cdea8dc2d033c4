package v1alpha1

// Condition types reported on a WorkloadClass's status.conditions. Every condition carries
// the observedGeneration it was computed for.
const (
	// ConditionSynced is True when every rendered child has been applied for the current
	// generation.
	ConditionSynced = "Synced"
	// ConditionReady is True when Karpenter reports every child Ready.
	ConditionReady = "Ready"
	// ConditionSignalsCurrent is True when the cost model's spot signals are fresh.
	ConditionSignalsCurrent = "SignalsCurrent"
	// ConditionAccess is True when the class's access rule is enforced (or it has none)
	// and every namespace that names it its default may use it.
	ConditionAccess = "Access"
	// ConditionBudgetExceeded is True while the class costs its spec.budget or more; absent
	// without a budget.
	ConditionBudgetExceeded = "BudgetExceeded"
	// ConditionCommitmentsCurrent is True when every Savings Plan and Reserved Instance of
	// the Baseline prices the class's rungs; False names an entry the manager leaves out
	// (the class keeps rendering without it). Absent when the Baseline declares none. The
	// Baseline carries it too.
	ConditionCommitmentsCurrent = "CommitmentsCurrent"
)

// Reasons for the CommitmentsCurrent condition.
const (
	// ReasonCommitmentsCurrent (True): every declared commitment is in use.
	ReasonCommitmentsCurrent = "Current"
	// ReasonCommitmentExpired (False): a commitment's end is past; it is left out.
	ReasonCommitmentExpired = "Expired"
	// ReasonCommitmentUnresolved (False): an entry lacks the facts to price anything (a
	// Savings Plan without type, a percent share without its commitment), or names an id
	// that neither the Baseline nor the signals' commitments.json has facts for; it is left
	// out.
	ReasonCommitmentUnresolved = "Unresolved"
	// ReasonCommitmentExportInvalid (False): an entry takes its facts from the signals
	// ConfigMap's commitments.json, which cannot be read; it is left out, and the entries
	// the Baseline prices alone keep pricing.
	ReasonCommitmentExportInvalid = "ExportInvalid"
)

// Reasons for the BudgetExceeded condition (and its events).
const (
	// ReasonBudgetHeld (True): mode Enforce; every rung's limits are held at its usage.
	ReasonBudgetHeld = "Held"
	// ReasonBudgetWarned (True): mode Warn; nothing is held.
	ReasonBudgetWarned = "OverBudget"
	// ReasonUnderBudget (False): the class costs less than its budget; nothing is held.
	ReasonUnderBudget = "UnderBudget"
)

// Reasons for the Access condition.
const (
	// ReasonAccessEnforced (True): the API server enforces spec.access through the
	// chart's ValidatingAdmissionPolicy poolsmith-access and the class's AccessRule.
	ReasonAccessEnforced = "Enforced"
	// ReasonAccessLagging (False): the class's NodePool family cannot be written
	// (OwnershipConflict, InvalidSpec, ApplyFailed), so its AccessRule enforces the
	// narrower of the rule enforced before and spec.access, with the taints and rungs of
	// the family that exists: a narrower spec.access is enforced at once, a wider one once
	// the family is written.
	ReasonAccessLagging = "Lagging"
	// ReasonAccessOpen (True): the class has no access rule; any namespace may use it.
	ReasonAccessOpen = "Open"
	// ReasonDefaultExcluded (False): namespaces name the class their default
	// (poolsmith.dev/default-class) but its access rule excludes them; their pods get no
	// defaults from it.
	ReasonDefaultExcluded = "DefaultExcluded"
	// ReasonDefaultsUnavailable (False): the API server does not serve
	// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, so namespace defaults are
	// not applied; access rules are still enforced.
	ReasonDefaultsUnavailable = "DefaultsUnavailable"
	// ReasonAccessDisabled (False): the manager runs with --access-policies=false; neither
	// access rules nor namespace defaults are enforced.
	ReasonAccessDisabled = "Disabled"
)

// Reasons for the Synced condition.
const (
	// ReasonApplied (True): every child is applied and matches the rendered state.
	ReasonApplied = "Applied"
	// ReasonReconciling (Unknown): a pass for the current generation has not finished.
	// Ready gives it too when it was True for an older generation.
	ReasonReconciling = "Reconciling"
	// ReasonBaselineNotFound (False): the referenced Baseline does not exist; children are
	// left exactly as they are.
	ReasonBaselineNotFound = "BaselineNotFound"
	// ReasonInvalidSpec (False): the class cannot be rendered; the message says why.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonBaselineConflict (False): the class contradicts a mandatory Baseline field,
	// such as a tag or label value.
	ReasonBaselineConflict = "BaselineConflict"
	// ReasonGuardrailViolation (False): the class is outside the guardrails of its
	// Baseline (spec.guardrails) or contradicts its mandatory values, as the API server's
	// guardrail policy judges it; typically a Baseline tightened after the class was
	// admitted. Its children are left exactly as they are.
	ReasonGuardrailViolation = "GuardrailViolation"
	// ReasonOwnershipConflict (False): an object Poolsmith would create already exists and
	// is not owned by this class; it is left untouched.
	ReasonOwnershipConflict = "OwnershipConflict"
	// ReasonApplyFailed (False): the API server rejected an apply.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonDeleting (False): the class is being deleted and its children removed.
	ReasonDeleting = "Deleting"
)

// Reasons for the Ready condition.
const (
	// ReasonAllReady (True): Karpenter reports every child Ready.
	ReasonAllReady = "AllReady"
	// ReasonNotSynced (False): the class is not Synced, so readiness is not assessed.
	ReasonNotSynced = "NotSynced"
	// ReasonNodePoolNotReady (False): a NodePool reports Ready=False; the message names it.
	ReasonNodePoolNotReady = "NodePoolNotReady"
	// ReasonNodeClassNotReady (False): the EC2NodeClass reports Ready=False; the message
	// names it and its failing condition.
	ReasonNodeClassNotReady = "NodeClassNotReady"
	// ReasonAwaitingKarpenter (Unknown): Karpenter has not yet reported on every child.
	ReasonAwaitingKarpenter = "AwaitingKarpenter"
)

// Reasons for the SignalsCurrent condition.
const (
	// ReasonFresh (True): spot signals are within their freshness window.
	ReasonFresh = "Fresh"
	// ReasonStale (False): spot signals are older than their freshness window; weights
	// fall back to the embedded catalog.
	ReasonStale = "Stale"
	// ReasonMissing (False): no spot signals are available; weights fall back to the
	// embedded catalog.
	ReasonMissing = "Missing"
)

// Labels and annotations Poolsmith sets on the objects and nodes it renders.
const (
	// LabelClass names the WorkloadClass on its children and on every node of its rungs,
	// so pods select a class with a nodeSelector on it.
	LabelClass = "poolsmith.dev/class"
	// LabelRung names the rung (NodePool) on every node it launches.
	LabelRung = "poolsmith.dev/rung"
	// LabelManagedBy marks children Poolsmith manages; its cache selects on it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on Poolsmith's children.
	ManagedByValue = "poolsmith"
	// AnnotationRetired marks a NodePool whose limits Poolsmith set to zero under
	// prunePolicy Retire, so that it can restore them if the class renders it again.
	AnnotationRetired = "poolsmith.dev/retired"
	// Finalizer holds a WorkloadClass until its NodePools and EC2NodeClass are removed.
	Finalizer = "poolsmith.dev/finalizer"
	// LabelDefaultClass on a namespace names the WorkloadClass its pods get when they select
	// none (applied by the class's MutatingAdmissionPolicy on pod creation).
	LabelDefaultClass = "poolsmith.dev/default-class"
	// DefaultBaselineName is the Baseline used when a class names none.
	DefaultBaselineName = "default"
)
