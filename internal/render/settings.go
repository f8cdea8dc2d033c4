package render

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Inputs are everything one class is rendered from: the class, its Baseline (nil when it
// does not exist) and what only the cluster knows (Options). internal/observe's
// Source.Assemble builds them, the one way the controller, the CLI and the rebalance
// reconciler share.
type Inputs struct {
	Class    *v1alpha1.WorkloadClass
	Baseline *v1alpha1.Baseline
	Options  Options
}

// Render renders the inputs; see Render.
func (in Inputs) Render() (*Result, error) { return Render(in.Baseline, in.Class, in.Options) }

// Settings are what the renderer resolves for a class beyond the objects it writes, each
// with its origin: what the rebalance reconciler acts on and what the access rule
// enforces. A later concern (headroom, cost) adds its resolved value here and its rows
// to Fields, resolved by the same pick precedence.
type Settings struct {
	// Rebalance is spec.rebalance resolved: each field from the class, else the Baseline,
	// else Poolsmith's default.
	Rebalance Rebalance
	// RebalanceErr says why spec.rebalance cannot be acted on: the rebalance reconciler
	// stops on it. It does not stop the render (the API server refuses such values anyway).
	RebalanceErr error
	// Access is spec.access as the renderer enforces it.
	Access Access
	// Limits are the class-wide limits the rungs share: spec.limits, and the Baseline's
	// guardrails.ceilings for the resources the class does not limit (ClassLimits).
	Limits corev1.ResourceList
	// Budget is spec.budget, else the Baseline's guardrails.ceilings.budgetPerHour,
	// enforced (ClassBudget); nil when neither is set.
	Budget *v1alpha1.Budget
	// Commitments are the Baseline's commitments as they apply to the class: which still
	// run, which are Open for it, which were left out.
	Commitments Commitments
	// Fields are every resolved setting with its value and origin: Object is
	// WorkloadClass/NAME and Path the setting (spec.rebalance.policy, access.enforced).
	// explain prints the spec.rebalance ones as its rebalance section.
	Fields []Field
}

// Rebalance is a class's resolved spec.rebalance, what internal/rebalance decides with.
type Rebalance struct {
	Policy          v1alpha1.RebalancePolicy
	MaxInterruption catalog.Bucket
	After           time.Duration
	MaxConcurrent   intstr.IntOrString
	QuietPeriod     time.Duration
}

// Access is spec.access as enforced.
type Access struct {
	// Enforced is true when the class's AccessRule restricts it: spec.access is set and
	// the operator renders AccessRules.
	Enforced bool
	// Allowed says who may use the class; empty when it is open.
	Allowed string
}

// Resolve resolves a class's settings without rendering its objects (the rebalance
// reconciler needs nothing more on each pass); Render's Result carries the same.
// in.Baseline may be nil: the class's values and the defaults then decide.
func Resolve(in Inputs) Settings {
	var s Settings
	object := "WorkloadClass/" + in.Class.Name
	add := func(path, value string, origin Origin) {
		s.Fields = append(s.Fields, Field{Object: object, Path: path, Value: value, Origin: origin})
	}
	var base *v1alpha1.Rebalance
	if in.Baseline != nil {
		base = in.Baseline.Spec.Rebalance
	}
	s.Rebalance, s.RebalanceErr = resolveRebalance(in.Class.Spec.Rebalance, base, add)
	s.Access = resolveAccess(in.Class, in.Options, add)
	s.Limits = resolveLimits(in, add)
	s.Budget = resolveBudget(in, add)
	s.Commitments = resolveCommitments(in, add)
	return s
}

// resolveRebalance takes each field of spec.rebalance from the class, else the Baseline,
// else Poolsmith's default, by pick. A pointer field set to its zero value (after: 0s)
// is set.
func resolveRebalance(class, baseline *v1alpha1.Rebalance, add func(path, value string, origin Origin)) (Rebalance, error) {
	var c, b v1alpha1.Rebalance
	if class != nil {
		c = *class
	}
	if baseline != nil {
		b = *baseline
	}
	after, _ := time.ParseDuration(v1alpha1.DefaultRebalanceAfter)
	quiet, _ := time.ParseDuration(v1alpha1.DefaultRebalanceQuietPeriod)
	maxConcurrent := intstr.FromInt32(v1alpha1.DefaultRebalanceMaxConcurrent)

	var s Rebalance
	policy, origin := pick(
		layer[v1alpha1.RebalancePolicy]{v1alpha1.RebalanceOff, OriginPoolsmithDefault},
		layer[v1alpha1.RebalancePolicy]{b.Policy, OriginBaseline},
		layer[v1alpha1.RebalancePolicy]{c.Policy, OriginClass})
	s.Policy = policy
	add("spec.rebalance.policy", string(policy), origin)

	bucket, origin := pick(
		layer[string]{v1alpha1.DefaultRebalanceMaxInterruption, OriginPoolsmithDefault},
		layer[string]{b.MaxInterruption, OriginBaseline},
		layer[string]{c.MaxInterruption, OriginClass})
	add("spec.rebalance.maxInterruption", bucket, origin)

	afterSet, origin := pick(
		layer[*metav1.Duration]{&metav1.Duration{Duration: after}, OriginPoolsmithDefault},
		layer[*metav1.Duration]{b.After, OriginBaseline},
		layer[*metav1.Duration]{c.After, OriginClass})
	s.After = afterSet.Duration
	add("spec.rebalance.after", s.After.String(), origin)

	concurrent, origin := pick(
		layer[*intstr.IntOrString]{&maxConcurrent, OriginPoolsmithDefault},
		layer[*intstr.IntOrString]{b.MaxConcurrent, OriginBaseline},
		layer[*intstr.IntOrString]{c.MaxConcurrent, OriginClass})
	s.MaxConcurrent = *concurrent
	add("spec.rebalance.maxConcurrent", s.MaxConcurrent.String(), origin)

	quietSet, origin := pick(
		layer[*metav1.Duration]{&metav1.Duration{Duration: quiet}, OriginPoolsmithDefault},
		layer[*metav1.Duration]{b.QuietPeriod, OriginBaseline},
		layer[*metav1.Duration]{c.QuietPeriod, OriginClass})
	s.QuietPeriod = quietSet.Duration
	add("spec.rebalance.quietPeriod", s.QuietPeriod.String(), origin)

	s.MaxInterruption = catalog.BucketUnknown
	for bk := catalog.BucketUnder5; bk <= catalog.BucketOver20; bk++ {
		if bk.String() == bucket {
			s.MaxInterruption = bk
		}
	}
	if s.MaxInterruption == catalog.BucketUnknown {
		return s, fmt.Errorf("spec.rebalance.maxInterruption: unknown bucket %q", bucket)
	}
	if s.QuietPeriod <= 0 {
		return s, fmt.Errorf("spec.rebalance.quietPeriod: must be positive")
	}
	return s, nil
}

// accessEnforced reports whether the class's access rule is enforced: spec.access is set
// and the AccessRule is rendered.
func accessEnforced(class *v1alpha1.WorkloadClass, opts Options) bool {
	return class.Spec.Access != nil && opts.Capabilities.AccessRules()
}

// resolveAccess resolves whether spec.access is enforced and whom it allows.
func resolveAccess(class *v1alpha1.WorkloadClass, opts Options, add func(path, value string, origin Origin)) Access {
	a := Access{Enforced: accessEnforced(class, opts)}
	switch {
	case class.Spec.Access == nil:
		add("access.enforced", "false", OriginPoolsmithDefault)
	case !a.Enforced:
		add("access.enforced", "false", OriginComputed("access policies off"))
	default:
		a.Allowed = describeAccess(class.Spec.Access)
		add("access.enforced", strconv.FormatBool(true), OriginClass)
		add("access.allowed", a.Allowed, OriginClass)
	}
	return a
}
