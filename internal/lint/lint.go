// Package lint checks rendered NodePool families across rungs and classes for the
// mistakes Karpenter accepts silently: overlapping rungs, classes that compete for the
// same pods with overlapping weights, shapes that select no instance type, Baseline
// contradictions, taints pods will not tolerate, and spot prices whose discount is an
// outlier in its category. It is pure, like the renderer.
package lint

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/render"
)

// Severity of a finding: errors fail lint, warnings and notes do not.
type Severity string

const (
	Error   Severity = "error"
	Warning Severity = "warning"
	// Info notes what deserves a look but changes nothing.
	Info Severity = "info"
)

// Checks, by the name findings carry.
const (
	CheckInvalidSpec      = "invalid-spec"
	CheckBaselineConflict = "baseline-conflict"
	// CheckGuardrail is a class outside its Baseline's guardrails, as the API server's
	// guardrail policy judges it (internal/guardrail).
	CheckGuardrail          = "guardrail"
	CheckRungOverlap        = "rung-overlap"
	CheckClassOverlap       = "class-overlap"
	CheckSelectsNothing     = "selects-nothing"
	CheckNameCollision      = "name-collision"
	CheckTolerationNeeded   = "toleration-needed"
	CheckGPUUntainted       = "gpu-untainted"
	CheckFallbackWithoutTGP = "fallback-without-grace-period"
	CheckSliceArch          = "slice-not-for-architecture"
	CheckFallbackPreferred  = "fallback-expiry-on-preferred"
	CheckUnknownSlice       = "unknown-slice"
	CheckSpotOutlier        = "spot-outlier"
	CheckRebalanceExpiry    = "rebalance-with-fallback-expiry"
	// Headroom checks (docs/headroom.md). A unit no type of its rung hosts is an
	// invalid-spec error naming the rung, from the renderer.
	CheckHeadroomOverLimits     = "headroom-over-limits"
	CheckHeadroomScheduleClosed = "headroom-schedule-closed"
	CheckHeadroomPodsCost       = "headroom-pods-cost"
)

// Finding is one problem.
type Finding struct {
	Severity Severity `json:"severity"`
	// Object is KIND/NAME of the WorkloadClass or generated object concerned.
	Object  string `json:"object"`
	Check   string `json:"check"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s\t%s\t%s\t%s", f.Severity, f.Object, f.Check, f.Message)
}

// Class is one class to lint: its render, or the error that stopped it.
type Class struct {
	Class    *v1alpha1.WorkloadClass
	Baseline *v1alpha1.Baseline
	Result   *render.Result
	Err      error
}

// HasErrors says whether any finding is an error.
func HasErrors(findings []Finding) bool {
	for _, f := range findings {
		if f.Severity == Error {
			return true
		}
	}
	return false
}

// Lint runs every check against the catalog and region the classes were rendered with
// (opts; the embedded catalog and us-east-1 when unset); findings are sorted by object,
// then check.
func Lint(classes []Class, opts render.Options) []Finding {
	if opts.Catalog == nil {
		if _, err := catalog.Load(); err != nil {
			return []Finding{{Severity: Error, Object: "catalog", Check: CheckInvalidSpec, Message: err.Error()}}
		}
	}
	cat, region := priced(opts)
	outliers := cat.SpotOutliers(region)
	var findings []Finding
	add := func(sev Severity, object, check, format string, args ...any) {
		findings = append(findings, Finding{Severity: sev, Object: object, Check: check, Message: fmt.Sprintf(format, args...)})
	}
	var ok []Class
	for _, c := range classes {
		obj := "WorkloadClass/" + c.Class.Name
		if c.Err != nil {
			if errs, isRender := c.Err.(render.Errors); isRender {
				for _, e := range errs {
					check := CheckInvalidSpec
					switch e.Reason {
					case v1alpha1.ReasonBaselineConflict:
						check = CheckBaselineConflict
					case v1alpha1.ReasonGuardrailViolation:
						check = CheckGuardrail
					}
					add(Error, obj, check, "%s", e.Error())
				}
			} else {
				add(Error, obj, CheckInvalidSpec, "%v", c.Err)
			}
			continue
		}
		ok = append(ok, c)
		checkRungOverlap(c, add)
		checkSelectsNothing(c, cat, add)
		checkSlices(c, cat, add)
		checkTaints(c, add)
		checkFallback(c, add)
		checkRebalanceExpiry(c, add)
		checkOutliers(c, opts, outliers, add)
		checkHeadroom(c, opts, add)
	}
	results := make([]*render.Result, len(ok))
	for i, c := range ok {
		results[i] = c.Result
	}
	findings = append(findings, NameCollisions(results)...)
	findings = append(findings, Commitments(ok, opts)...)
	checkClassOverlap(ok, add)
	sort.SliceStable(findings, func(i, j int) bool {
		if findings[i].Object != findings[j].Object {
			return findings[i].Object < findings[j].Object
		}
		return findings[i].Check < findings[j].Check
	})
	return findings
}

type adder func(sev Severity, object, check, format string, args ...any)

func requirements(np *karpv1.NodePool) scheduling.Requirements {
	return scheduling.NewNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
}

// checkRungOverlap: no node may match two rungs of one class.
func checkRungOverlap(c Class, add adder) {
	pools := c.Result.NodePools
	for i := range pools {
		for j := i + 1; j < len(pools); j++ {
			if requirements(pools[i]).Intersects(requirements(pools[j])) == nil {
				add(Error, "WorkloadClass/"+c.Class.Name, CheckRungOverlap, "rungs %s and %s overlap: a node can match both", pools[i].Name, pools[j].Name)
			}
		}
	}
}

// hardTaints are the taints that keep pods off a node, by key:effect.
func hardTaints(np *karpv1.NodePool) map[string]corev1.Taint {
	out := map[string]corev1.Taint{}
	for _, t := range np.Spec.Template.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out[t.Key+":"+string(t.Effect)] = t
		}
	}
	return out
}

func sameKeys(a, b map[string]corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func band(r *render.Result) (lo, hi int32) {
	lo, hi = 101, 0
	for _, rung := range r.Rungs {
		lo, hi = min(lo, rung.Weight), max(hi, rung.Weight)
	}
	return lo, hi
}

// classFacts are what the class-overlap check compares, computed once per class: the
// check is over every pair of classes.
type classFacts struct {
	taints map[string]corev1.Taint
	pools  []*karpv1.NodePool
	reqs   []scheduling.Requirements
	lo, hi int32
}

// maxNamedOverlaps is how many further overlapping classes one class-overlap finding
// names; the rest are counted. One finding per class keeps lint's output linear in the
// number of classes even when every class overlaps every other.
const maxNamedOverlaps = 5

// checkClassOverlap: classes that can take the same pods (no distinguishing taint and
// intersecting requirements) must sit in separate weight bands, or the order in which
// Karpenter tries them is decided by name. Each class gets at most one finding: its first
// overlap in detail, then how many other classes it overlaps.
func checkClassOverlap(classes []Class, add adder) {
	facts := make([]*classFacts, len(classes))
	for i, c := range classes {
		if len(c.Result.NodePools) == 0 {
			continue
		}
		f := &classFacts{taints: hardTaints(c.Result.NodePools[0]), pools: c.Result.NodePools}
		for _, np := range c.Result.NodePools {
			f.reqs = append(f.reqs, requirements(np))
		}
		f.lo, f.hi = band(c.Result)
		facts[i] = f
	}
	for i := range classes {
		a := facts[i]
		if a == nil {
			continue
		}
		var first string
		var others []string
		for j := i + 1; j < len(classes); j++ {
			b := facts[j]
			if b == nil || !(a.lo <= b.hi && b.lo <= a.hi) || !sameKeys(a.taints, b.taints) {
				continue
			}
			ra, rb, shared := overlappingRungs(a, b)
			if !shared {
				continue
			}
			if first == "" {
				first = fmt.Sprintf("can take the same pods as class %s (no distinguishing taint; rungs %s and %s intersect) and their weight bands %d-%d and %d-%d overlap: give them separate weighting.ceiling bands",
					classes[j].Class.Name, ra, rb, a.lo, a.hi, b.lo, b.hi)
				continue
			}
			others = append(others, classes[j].Class.Name)
		}
		switch {
		case first == "":
			continue
		case len(others) > maxNamedOverlaps:
			first += fmt.Sprintf("; and likewise %d more classes: %s, ...", len(others), strings.Join(others[:maxNamedOverlaps], ", "))
		case len(others) > 0:
			first += fmt.Sprintf("; and likewise class %s", strings.Join(others, ", class "))
		}
		add(Warning, "WorkloadClass/"+classes[i].Class.Name, CheckClassOverlap, "%s", first)
	}
}

func overlappingRungs(a, b *classFacts) (string, string, bool) {
	for x := range a.reqs {
		for y := range b.reqs {
			if a.reqs[x].Intersects(b.reqs[y]) == nil {
				return a.pools[x].Name, b.pools[y].Name, true
			}
		}
	}
	return "", "", false
}

// NameCollisions finds generated objects of one kind and name that more than one class
// renders: the cluster holds one object per name, so the classes would fight over it.
// render, explain and simulate refuse such input with it; lint reports it.
func NameCollisions(results []*render.Result) []Finding {
	owner := map[string]string{}
	var findings []Finding
	for _, r := range results {
		var names []string
		if r.NodeClass != nil {
			names = append(names, "EC2NodeClass/"+r.NodeClass.Name)
		}
		for _, np := range r.NodePools {
			names = append(names, "NodePool/"+np.Name)
		}
		for _, ov := range r.NodeOverlays {
			names = append(names, "NodeOverlay/"+ov.Name)
		}
		for _, obj := range names {
			other, taken := owner[obj]
			switch {
			case !taken:
				owner[obj] = r.Class
			case other != r.Class:
				findings = append(findings, Finding{Severity: Error, Object: obj, Check: CheckNameCollision,
					Message: fmt.Sprintf("rendered by both class %s and class %s: rename one of the classes or the slice that yields this name", other, r.Class)})
			}
		}
	}
	return findings
}

// checkTaints: pods must tolerate a class's taints; a GPU class should keep other pods off.
func checkTaints(c Class, add adder) {
	obj := "WorkloadClass/" + c.Class.Name
	if len(c.Result.NodePools) == 0 {
		return
	}
	taints := hardTaints(c.Result.NodePools[0])
	if c.Result.Profile == v1alpha1.ProfileGPU {
		if _, ok := taints[render.GPUTaintKey+":"+string(corev1.TaintEffectNoSchedule)]; !ok {
			add(Warning, obj, CheckGPUUntainted, "GPU nodes are not tainted %s:NoSchedule, so pods that need no GPU can land on them and keep them up", render.GPUTaintKey)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(taints)) {
		t := taints[k]
		msg := fmt.Sprintf("pods need a toleration for %s=%s:%s to land on this class", t.Key, t.Value, t.Effect)
		if t.Key == render.GPUTaintKey {
			msg += " (added automatically to pods that request nvidia.com/gpu only where the ExtendedResourceToleration admission plugin is enabled)"
		}
		add(Warning, obj, CheckTolerationNeeded, "%s", msg)
	}
}

// checkFallback: a shorter fallback expiry without a terminationGracePeriod can leave
// expiring nodes draining forever behind a PodDisruptionBudget; and fallback expiry follows
// the class's capacity-type order, so when weights rank another capacity type first it
// recycles the nodes Karpenter prefers.
func checkFallback(c Class, add adder) {
	top := 0
	for i, rung := range c.Result.Rungs {
		if rung.Weight > c.Result.Rungs[top].Weight {
			top = i
		}
	}
	if len(c.Result.Rungs) > 0 && c.Result.Rungs[top].Fallback &&
		c.Result.NodePools[top].Spec.Template.Spec.ExpireAfter.String() != c.Result.NodePools[0].Spec.Template.Spec.ExpireAfter.String() {
		add(Warning, "WorkloadClass/"+c.Class.Name, CheckFallbackPreferred,
			"weights rank %s first, but spec.capacityTypes lists %s first, so fallbackExpireAfter recycles the preferred %s nodes every %s: list %s first, or set fallbackExpireAfter: Never",
			c.Result.Rungs[top].CapacityType, c.Result.Rungs[0].CapacityType, c.Result.Rungs[top].CapacityType,
			c.Result.NodePools[top].Spec.Template.Spec.ExpireAfter.String(), c.Result.Rungs[top].CapacityType)
	}
	for i, rung := range c.Result.Rungs {
		np := c.Result.NodePools[i]
		if rung.Fallback && np.Spec.Template.Spec.TerminationGracePeriod == nil &&
			np.Spec.Template.Spec.ExpireAfter.Duration != nil && c.Result.NodePools[0].Spec.Template.Spec.ExpireAfter.Duration != nil &&
			*np.Spec.Template.Spec.ExpireAfter.Duration < *c.Result.NodePools[0].Spec.Template.Spec.ExpireAfter.Duration {
			add(Warning, "WorkloadClass/"+c.Class.Name, CheckFallbackWithoutTGP,
				"fallback rungs expire after %s but no terminationGracePeriod bounds their drain; set spec.terminationGracePeriod", np.Spec.Template.Spec.ExpireAfter.String())
			return
		}
	}
}

// checkRebalanceExpiry warns when spec.rebalance and fallbackExpireAfter both replace
// fallback nodes: an expired node can land on a fallback rung again and then be moved,
// disrupting its pods twice, and expiry ignores do-not-disrupt and PDBs. The policy is the
// one the renderer resolved (class, else Baseline, else Off).
func checkRebalanceExpiry(c Class, add adder) {
	if c.Result.Settings.Rebalance.Policy != v1alpha1.RebalancePreferred || len(c.Result.NodePools) == 0 {
		return
	}
	top := c.Result.NodePools[0].Spec.Template.Spec.ExpireAfter
	for i, rung := range c.Result.Rungs {
		exp := c.Result.NodePools[i].Spec.Template.Spec.ExpireAfter
		if rung.Fallback && exp.Duration != nil && (top.Duration == nil || *exp.Duration < *top.Duration) {
			add(Warning, "WorkloadClass/"+c.Class.Name, CheckRebalanceExpiry,
				"spec.rebalance moves fallback nodes up the ladder and fallbackExpireAfter also recycles them every %s, ignoring do-not-disrupt and PDBs: a node can be disrupted twice; set fallbackExpireAfter: Never, or rebalance.policy: Off", exp.String())
			return
		}
	}
}

// checkSelectsNothing finds rungs whose requirements contradict each other through what
// a family name implies: category, generation and architecture.
func checkSelectsNothing(c Class, cat *catalog.Catalog, add adder) {
	for i, np := range c.Result.NodePools {
		rung := c.Result.Rungs[i]
		reqs := requirements(np)
		obj := "NodePool/" + np.Name
		if rung.CapacityType == v1alpha1.CapacityTypeReserved && c.Baseline != nil && len(c.Baseline.Spec.NodeClass.CapacityReservationSelectorTerms) == 0 {
			add(Error, obj, CheckSelectsNothing, "capacity type reserved needs capacityReservationSelectorTerms in Baseline %s", c.Baseline.Name)
		}
		if explainFamilies(np, rung, reqs, cat, add) {
			continue
		}
		if !namesKnown(np, cat) {
			continue // a family or type newer than the catalog: nothing to judge by
		}
		matched := false
		for _, t := range cat.Types {
			if t.Matches(np.Spec.Template.Spec.Requirements) {
				matched = true
				break
			}
		}
		if !matched {
			add(Error, obj, CheckSelectsNothing, "no instance type in the catalog satisfies the rung's requirements")
		}
	}
}

// explainFamilies reports families that can never match their rung, with the reason
// their name gives; it returns true when it reported any.
func explainFamilies(np *karpv1.NodePool, rung render.Rung, reqs scheduling.Requirements, cat *catalog.Catalog, add adder) bool {
	families := reqs.Get(render.LabelInstanceFamily)
	if families.Operator() != corev1.NodeSelectorOpIn {
		return false
	}
	obj := "NodePool/" + np.Name
	reported := false
	var possible []string
	for _, f := range families.Values() {
		facts, ok := catalog.ParseFamily(f)
		if !ok {
			possible = append(possible, f) // unknown naming: give it the benefit of the doubt
			continue
		}
		if arch, known := cat.Arch(f); known {
			facts.Arch = arch
		}
		var why []string
		if !reqs.Get(render.LabelInstanceCategory).Has(facts.Category) {
			why = append(why, fmt.Sprintf("category %s is not allowed", facts.Category))
		}
		if !reqs.Get(render.LabelInstanceGeneration).Has(strconv.Itoa(facts.Generation)) {
			why = append(why, fmt.Sprintf("generation %d is below the floor", facts.Generation))
		}
		if !reqs.Get(corev1.LabelArchStable).Has(facts.Arch) {
			why = append(why, fmt.Sprintf("it is %s", facts.Arch))
		}
		if len(why) == 0 {
			possible = append(possible, f)
		} else if rung.SliceKind == render.SliceFamily || len(families.Values()) == 1 {
			add(Error, obj, CheckSelectsNothing, "family %s can never match: %s", f, strings.Join(why, ", "))
			reported = true
		}
	}
	if len(possible) == 0 && rung.SliceKind != render.SliceFamily && len(families.Values()) > 1 {
		add(Error, obj, CheckSelectsNothing, "none of families %v can match the rung's other requirements", families.Values())
		reported = true
	}
	return reported
}

// namesKnown says whether every family and type a rung names has facts in the catalog.
func namesKnown(np *karpv1.NodePool, cat *catalog.Catalog) bool {
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Operator != corev1.NodeSelectorOpIn || (r.Key != render.LabelInstanceFamily && r.Key != corev1.LabelInstanceTypeStable) {
			continue
		}
		for _, v := range r.Values {
			if _, ok := cat.Arch(v); !ok {
				return false
			}
		}
	}
	return true
}

// checkSlices reports named families and types that render no rung because the catalog
// knows them for none of the class's architectures, and names the catalog does not know.
func checkSlices(c Class, cat *catalog.Catalog, add adder) {
	shape := c.Class.Spec.Instances
	if shape == nil {
		return
	}
	archs := map[string]bool{}
	for _, r := range c.Result.Rungs {
		archs[string(r.Arch)] = true
	}
	obj := "WorkloadClass/" + c.Class.Name
	for _, named := range []struct {
		kind  string
		names []string
	}{{"family", shape.Families}, {"type", shape.Types}} {
		for _, n := range named.names {
			arch, ok := cat.Arch(n)
			switch {
			case !ok:
				add(Warning, obj, CheckUnknownSlice, "%s %s is not in the instance catalog (it may be newer): it is used for every architecture and cannot be checked", named.kind, n)
			case !archs[arch]:
				add(Warning, obj, CheckSliceArch, "%s %s exists only for %s, not for the class's architectures: it renders no rung", named.kind, n, arch)
			}
		}
	}
}
