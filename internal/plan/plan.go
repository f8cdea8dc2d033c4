package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/render"
)

// Action is what happens to one child.
type Action string

const (
	// Create a child the cluster does not hold.
	Create Action = "create"
	// Update a child whose fields differ from the render, or that holds fields the render
	// does not produce: the whole object is replaced.
	Update Action = "update"
	// Revive updates a retired NodePool the class renders again, restoring its limits.
	Revive Action = "revive"
	// Unchanged children are not written.
	Unchanged Action = "unchanged"
	// Conflict: an object the class does not control holds the name. Nothing of the class is
	// written while any conflict lasts.
	Conflict Action = "conflict"
	// Delete a NodePool or NodeOverlay no longer rendered (prunePolicy Delete, or a retired
	// NodePool with no nodes left).
	Delete Action = "delete"
	// Retire sets an unrendered NodePool's limits to zero so no node launches.
	Retire Action = "retire"
	// Retiring: a retired NodePool waits for Karpenter to drain it; no write.
	Retiring Action = "retiring"
	// Orphan removes Poolsmith's owner reference and labels from an unrendered NodePool.
	Orphan Action = "orphan"
)

// Writes reports whether carrying out the action sends a write.
func (a Action) Writes() bool {
	switch a {
	case Unchanged, Conflict, Retiring:
		return false
	}
	return true
}

// Kinds of the children.
const (
	KindNodeClass   = "EC2NodeClass"
	KindNodePool    = "NodePool"
	KindNodeOverlay = "NodeOverlay"
	// KindDeployment is the headroom's placeholder Deployment, in the headroom namespace.
	KindDeployment = "Deployment"
	// KindPodTemplate and KindCapacityBuffer are the headroom's CapacityBuffer mechanism,
	// in the headroom namespace.
	KindPodTemplate    = "PodTemplate"
	KindCapacityBuffer = "CapacityBuffer"
	// KindAccessRule is the parameter of the chart's access and default policies.
	KindAccessRule = render.KindAccessRule
)

// Step is one child and what happens to it.
type Step struct {
	Action Action
	Kind   string
	Name   string
	// Object is the whole object to send: for Create the render; for Update, Revive, Retire
	// and Orphan the live object with its spec (or metadata) replaced, carrying the live
	// resourceVersion so a concurrent write makes the update fail instead of being lost.
	Object map[string]any
	// Live is the object the cluster holds (nil for Create); the validator judges updates
	// against it, as the API server's transition rules do.
	Live map[string]any
	// LiveObject is the typed live object.
	LiveObject client.Object
	// Changes are the rendered fields the live object lacks or holds with another value.
	Changes []diff.Change
	// Removed are fields the live object holds under spec that the render does not produce.
	Removed []diff.Change
	// Drift says whether Karpenter replaces the nodes launched from the child.
	Drift diff.Drift
	// Verified is true for a Create whose name the API server was asked about. A Create
	// that is not verified may meet AlreadyExists, which the executor turns into the
	// ownership check.
	Verified bool
}

// Ref is KIND/NAME.
func (s Step) Ref() string { return s.Kind + "/" + s.Name }

// Plan is every step for one class, in write order: the EC2NodeClass, the NodePools in
// ladder order, the NodeOverlays, the admission policies (each before its binding), then
// what pruning does to children no longer rendered.
type Plan struct {
	Class string
	Steps []Step
}

// Blocked reports whether a foreign object holds a wanted name: then nothing is written.
func (p *Plan) Blocked() bool { return len(p.Conflicts()) > 0 }

// Conflicts are the KIND/NAMEs held by objects the class does not control.
func (p *Plan) Conflicts() []string { return p.refs(func(s Step) bool { return s.Action == Conflict }) }

// Writes are the steps that send a write, in order; none while the plan is blocked.
func (p *Plan) Writes() []Step {
	if p.Blocked() {
		return nil
	}
	var out []Step
	for _, s := range p.Steps {
		if s.Action.Writes() {
			out = append(out, s)
		}
	}
	return out
}

// Waves are the writes in the groups they are sent in, each once the one before it is
// written: the EC2NodeClass (the NodePools name it), then the rest of the family
// (NodePools, NodeOverlays, the AccessRule), then pruning, which never removes a rung
// before the family it leaves is in place. Within a group no write depends on another.
// None while the plan is blocked.
func (p *Plan) Waves() [][]Step {
	var nodeClass, family, prune []Step
	for _, s := range p.Writes() {
		switch {
		case s.Kind == KindNodeClass:
			nodeClass = append(nodeClass, s)
		case s.Action == Create || s.Action == Update || s.Action == Revive:
			family = append(family, s)
		default:
			prune = append(prune, s)
		}
	}
	var out [][]Step
	for _, w := range [][]Step{nodeClass, family, prune} {
		if len(w) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// Creates reports whether the plan creates a child.
func (p *Plan) Creates() bool {
	return slices.ContainsFunc(p.Steps, func(s Step) bool { return s.Action == Create })
}

// ChangesExisting reports whether the plan writes to a child that exists.
func (p *Plan) ChangesExisting() bool {
	return slices.ContainsFunc(p.Steps, func(s Step) bool { return s.Action.Writes() && s.Action != Create })
}

// Changed reports whether carrying out the plan writes anything.
func (p *Plan) Changed() bool { return len(p.Writes()) > 0 }

// Retiring are the NodePools being retired or waiting to be drained.
func (p *Plan) Retiring() []*karpv1.NodePool {
	var out []*karpv1.NodePool
	for _, s := range p.Steps {
		if s.Action == Retire || s.Action == Retiring {
			out = append(out, s.LiveObject.(*karpv1.NodePool))
		}
	}
	return out
}

// DriftNotice says which updates make Karpenter replace nodes; "" when none does.
func (p *Plan) DriftNotice() string {
	var parts []string
	if will := p.refs(func(s Step) bool { return s.Drift == diff.WillDrift }); len(will) > 0 {
		parts = append(parts, strings.Join(will, ", ")+" will drift: Karpenter replaces their nodes")
	}
	if may := p.refs(func(s Step) bool { return s.Drift == diff.MayDrift }); len(may) > 0 {
		parts = append(parts, strings.Join(may, ", ")+" may drift if their selectors now resolve differently")
	}
	if added := p.refs(addsAccessTaint); len(added) > 0 {
		parts = append(parts, "the access taint "+v1alpha1.TaintAccess+":NoExecute is new on "+strings.Join(added, ", ")+": pods need its toleration to run on their nodes")
	}
	return strings.Join(parts, "; ")
}

// addsAccessTaint reports whether a NodePool update drifts because it adds the class's
// NoExecute access taint (spec.access set, or Poolsmith upgraded to a version that sets
// it): the one drift a pod's tolerations must follow.
func addsAccessTaint(s Step) bool {
	live, ok := s.LiveObject.(*karpv1.NodePool)
	if s.Drift != diff.WillDrift || !ok {
		return false
	}
	has := func(taints []any) bool {
		for _, t := range taints {
			if m, ok := t.(map[string]any); ok && m["key"] == v1alpha1.TaintAccess && m["effect"] == string(corev1.TaintEffectNoExecute) {
				return true
			}
		}
		return false
	}
	spec, _ := s.Object["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	tspec, _ := tmpl["spec"].(map[string]any)
	want, _ := tspec["taints"].([]any)
	if !has(want) {
		return false
	}
	for _, t := range live.Spec.Template.Spec.Taints {
		if t.Key == v1alpha1.TaintAccess && t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}

func (p *Plan) refs(match func(Step) bool) []string {
	var out []string
	for _, s := range p.Steps {
		if match(s) {
			out = append(out, s.Ref())
		}
	}
	return out
}

// Validator judges writes as the API server would (internal/validate).
type Validator interface {
	Create(obj map[string]any) error
	Update(obj, old map[string]any) error
}

// Invalid is a write the API server would refuse.
type Invalid struct {
	Step Step
	Err  error
}

// Validate checks every write the plan would make, creates as creates and the rest as
// updates of the live object; it returns the refused ones. Deletes are not validated.
func (p *Plan) Validate(v Validator) []Invalid {
	var out []Invalid
	for _, s := range p.Writes() {
		var err error
		switch s.Action {
		case Delete:
			continue
		case Create:
			err = v.Create(s.Object)
		default:
			err = v.Update(s.Object, s.Live)
		}
		if err != nil {
			out = append(out, Invalid{Step: s, Err: err})
		}
	}
	return out
}

// Children are what the cluster holds of a class: only objects it controls, by name.
type Children struct {
	NodeClass    *awsv1.EC2NodeClass
	NodePools    map[string]*karpv1.NodePool
	NodeOverlays map[string]*karpv1alpha1.NodeOverlay
	// Policies hold the class's AccessRule, by KIND/NAME.
	Policies map[string]client.Object
	// Headroom holds the class's headroom children in the headroom namespace (the
	// placeholder Deployment, the PodTemplate and the CapacityBuffer), by KIND/NAME.
	Headroom map[string]client.Object
	// NodeClaims are the class's NodeClaims by the NodePool that launched them
	// (karpenter.sh/nodepool). A retired rung is deleted only when it has none: Karpenter
	// refreshes a NodePool's status.nodes only every few seconds, so a NodeClaim launched
	// just before retirement is not counted there yet.
	NodeClaims map[string][]*karpv1.NodeClaim
}

// PolicyObjects are the class's AccessRule, by KIND/NAME: a class's deletion deletes it
// under every prune policy (an orphaned rule would go on enforcing).
func (c Children) PolicyObjects() []client.Object {
	var objs []client.Object
	for _, ref := range slices.Sorted(maps.Keys(c.Policies)) {
		objs = append(objs, c.Policies[ref])
	}
	return objs
}

// HeadroomObjects are the class's headroom children by KIND/NAME: a CapacityBuffer before
// its PodTemplate, so that a deletion in this order never leaves a buffer without one.
func (c Children) HeadroomObjects() []client.Object {
	var objs []client.Object
	for _, ref := range slices.Sorted(maps.Keys(c.Headroom)) {
		objs = append(objs, c.Headroom[ref])
	}
	return objs
}

// HeadroomRef is the key of a headroom child in Children.Headroom.
func HeadroomRef(obj client.Object) string { return KindOf(obj) + "/" + obj.GetName() }

// Usage is what each NodePool uses now (status.resources), for splitting the class limit.
func (c Children) Usage() map[string]corev1.ResourceList {
	usage := map[string]corev1.ResourceList{}
	for name, np := range c.NodePools {
		usage[name] = np.Status.Resources
	}
	return usage
}

// Objects are every child: NodePools and NodeOverlays by name, then the EC2NodeClass.
// Headroom children are not among them: they hold no nodes and go with the class under
// every prune policy (HeadroomObjects).
func (c Children) Objects() []client.Object {
	objs := c.Ladder()
	if c.NodeClass != nil {
		objs = append(objs, c.NodeClass)
	}
	return objs
}

// Ladder are the NodePools and NodeOverlays by name: what goes before the EC2NodeClass.
func (c Children) Ladder() []client.Object {
	var objs []client.Object
	for _, n := range slices.Sorted(maps.Keys(c.NodePools)) {
		objs = append(objs, c.NodePools[n])
	}
	for _, n := range slices.Sorted(maps.Keys(c.NodeOverlays)) {
		objs = append(objs, c.NodeOverlays[n])
	}
	return objs
}

// Input is everything a plan is computed from.
type Input struct {
	// Class is the WorkloadClass as the cluster holds it: its UID decides ownership (empty
	// when the class does not exist yet, so nothing is its own).
	Class *v1alpha1.WorkloadClass
	// Result is the render.
	Result *render.Result
	// Live are the children the class controls.
	Live Children
	// Foreign are objects that hold a rendered name and that the class does not control.
	Foreign []client.Object
	// Unverified is true when names found neither in Live nor in Foreign were not asked of
	// the API server: their creates are not Verified.
	Unverified bool
	// Memo, when set, skips comparing a child already found to match the same render.
	Memo *Memo
}

// Schema is what the planner needs of the CRDs: the object as the API server would store
// it, with defaults, so that defaults are neither changes nor foreign fields.
type Schema interface {
	Defaulted(obj map[string]any) (map[string]any, error)
}

// Compute plans one class. It is pure: the same input gives the same plan.
func Compute(in Input, schema Schema) (*Plan, error) {
	p := &Plan{Class: in.Class.Name}
	foreign := map[string]client.Object{}
	for _, o := range in.Foreign {
		foreign[KindOf(o)+"/"+o.GetName()] = o
	}
	res := in.Result
	add := func(kind string, want client.Object, live client.Object, drift func(client.Object, client.Object) diff.Drift) error {
		step, err := childStep(in, schema, kind, want, live, foreign[kind+"/"+want.GetName()], drift)
		if err != nil {
			return fmt.Errorf("planning %s/%s: %w", kind, want.GetName(), err)
		}
		p.Steps = append(p.Steps, step)
		return nil
	}
	var liveNC client.Object
	if in.Live.NodeClass != nil {
		liveNC = in.Live.NodeClass
	}
	if err := add(KindNodeClass, res.NodeClass, liveNC, func(w, l client.Object) diff.Drift {
		return diff.NodeClassDrift(w.(*awsv1.EC2NodeClass), l.(*awsv1.EC2NodeClass))
	}); err != nil {
		return nil, err
	}
	for _, np := range res.NodePools {
		var live client.Object
		if l, ok := in.Live.NodePools[np.Name]; ok {
			live = l
		}
		if err := add(KindNodePool, np, live, func(w, l client.Object) diff.Drift {
			return diff.NodePoolDrift(w.(*karpv1.NodePool), l.(*karpv1.NodePool))
		}); err != nil {
			return nil, err
		}
	}
	for _, ov := range res.NodeOverlays {
		var live client.Object
		if l, ok := in.Live.NodeOverlays[ov.Name]; ok {
			live = l
		}
		// An overlay changes prices Karpenter sees, not what it hashes: no drift.
		if err := add(KindNodeOverlay, ov, live, func(client.Object, client.Object) diff.Drift { return diff.NoDrift }); err != nil {
			return nil, err
		}
	}
	for _, pol := range res.Policies {
		if rule, ok := pol.(*v1alpha1.AccessRule); ok {
			pol = withLiveRungs(rule, in.Live)
		}
		kind := KindOf(pol)
		var live client.Object
		if l, ok := in.Live.Policies[kind+"/"+pol.GetName()]; ok {
			live = l
		}
		// The AccessRule judges pods at admission; Karpenter hashes nothing of it.
		if err := add(kind, pol, live, func(client.Object, client.Object) diff.Drift { return diff.NoDrift }); err != nil {
			return nil, err
		}
	}
	if res.Headroom != nil {
		for _, obj := range res.Headroom.Objects {
			var live client.Object
			if l, ok := in.Live.Headroom[HeadroomRef(obj)]; ok {
				live = l
			}
			// Headroom is not part of any NodePool's hash: no drift.
			if err := add(KindOf(obj), obj, live, func(client.Object, client.Object) diff.Drift { return diff.NoDrift }); err != nil {
				return nil, err
			}
		}
	}
	prune, err := pruneSteps(in)
	if err != nil {
		return nil, err
	}
	p.Steps = append(p.Steps, prune...)
	return p, nil
}

// childStep compares one rendered child with what holds its name.
func childStep(in Input, schema Schema, kind string, want, live, foreign client.Object, drift func(client.Object, client.Object) diff.Drift) (Step, error) {
	step := Step{Kind: kind, Name: want.GetName()}
	if foreign != nil {
		step.Action, step.LiveObject = Conflict, foreign
		return step, nil
	}
	var key memoKey
	var sum [32]byte
	memo := in.Memo != nil && live != nil
	if memo {
		key = memoKey{class: in.Class.Name, kind: kind, name: want.GetName()}
		sum, memo = wantSum(in.Class, want)
		if memo && in.Memo.unchanged(key, sum, live) {
			step.Action, step.LiveObject = Unchanged, live
			return step, nil
		}
	}
	doc, err := render.CleanJSON(want)
	if err != nil {
		return step, err
	}
	doc["metadata"].(map[string]any)["ownerReferences"] = []any{OwnerReference(in.Class)}
	if live == nil {
		// Nothing to compare with: the defaulted form would only be thrown away, and the
		// create's validation defaults it again (and refuses what defaulting would).
		step.Action, step.Object, step.Verified = Create, doc, !in.Unverified
		return step, nil
	}
	wantDoc, err := schema.Defaulted(doc)
	if err != nil {
		return step, err
	}
	liveDoc, err := render.CleanJSON(live)
	if err != nil {
		return step, err
	}
	step.Live, step.LiveObject = liveDoc, live
	step.Changes = diff.Changes(wantDoc, liveDoc)
	content := body(wantDoc)
	step.Removed = prefixed(content, diff.Removed(mapAt(wantDoc, content), mapAt(liveDoc, content)))
	_, retired := live.GetAnnotations()[v1alpha1.AnnotationRetired]
	if retired {
		step.Removed = append(step.Removed, diff.Change{Path: "metadata.annotations." + v1alpha1.AnnotationRetired, Live: `"true"`})
	}
	if len(step.Changes) == 0 && len(step.Removed) == 0 {
		step.Action = Unchanged
		if memo {
			in.Memo.remember(key, sum, live)
		}
		return step, nil
	}
	step.Action = Update
	if retired {
		step.Action = Revive
	}
	step.Object = replaceSpec(liveDoc, wantDoc)
	step.Drift = drift(want, live)
	return step, nil
}

// body is the field that holds a child's content: spec, or a PodTemplate's template.
func body(doc map[string]any) string {
	if doc["kind"] == KindPodTemplate {
		return "template"
	}
	return "spec"
}

// replaceSpec is the live object with the rendered spec (body), the rendered labels and
// annotations over the live ones, the class's owner reference, and no retirement mark.
// Everything else Karpenter keeps in metadata (hash annotations, finalizers) stays.
func replaceSpec(live, want map[string]any) map[string]any {
	out := copyMap(live)
	out[body(want)] = want[body(want)]
	// A typed object read straight from the API server carries no apiVersion and kind.
	out["apiVersion"], out["kind"] = want["apiVersion"], want["kind"]
	md := mapAt(out, "metadata")
	wmd := mapAt(want, "metadata")
	for _, key := range []string{"labels", "annotations"} {
		merged := copyMap(mapAt(md, key))
		for k, v := range mapAt(wmd, key) {
			merged[k] = v
		}
		if key == "annotations" {
			delete(merged, v1alpha1.AnnotationRetired)
		}
		setOrDelete(md, key, merged)
	}
	md["ownerReferences"] = wmd["ownerReferences"]
	delete(md, "managedFields") // an update without them keeps the server's
	return out
}

// pruneSteps decide, by prunePolicy, what happens to children the class no longer renders.
func pruneSteps(in Input) ([]Step, error) {
	var steps []Step
	wanted := map[string]bool{}
	for _, ov := range in.Result.NodeOverlays {
		wanted[ov.Name] = true
	}
	// Overlays hold no nodes: one no longer rendered is deleted under every policy.
	for _, name := range slices.Sorted(maps.Keys(in.Live.NodeOverlays)) {
		if ov := in.Live.NodeOverlays[name]; !wanted[name] && ov.DeletionTimestamp.IsZero() {
			steps = append(steps, Step{Action: Delete, Kind: KindNodeOverlay, Name: name, LiveObject: ov})
		}
	}
	// The AccessRule holds no nodes either: one no longer rendered is deleted under every
	// prune policy, or it would go on enforcing. With --access-policies=false it is not
	// listed at all, so not pruned (see docs/controller.md).
	wantedPolicies := map[string]bool{}
	for _, pol := range in.Result.Policies {
		wantedPolicies[KindOf(pol)+"/"+pol.GetName()] = true
	}
	for _, ref := range slices.Sorted(maps.Keys(in.Live.Policies)) {
		if pol := in.Live.Policies[ref]; !wantedPolicies[ref] && pol.GetDeletionTimestamp().IsZero() {
			steps = append(steps, Step{Action: Delete, Kind: KindOf(pol), Name: pol.GetName(), LiveObject: pol})
		}
	}
	// Headroom holds no nodes of its own: one no longer rendered is deleted under every
	// policy (Karpenter consolidates the nodes it kept warm).
	wantedHeadroom := map[string]bool{}
	if in.Result.Headroom != nil {
		for _, obj := range in.Result.Headroom.Objects {
			wantedHeadroom[HeadroomRef(obj)] = true
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(in.Live.Headroom)) {
		if obj := in.Live.Headroom[ref]; !wantedHeadroom[ref] && obj.GetDeletionTimestamp().IsZero() {
			steps = append(steps, Step{Action: Delete, Kind: KindOf(obj), Name: obj.GetName(), LiveObject: obj})
		}
	}
	desired := map[string]bool{}
	for _, np := range in.Result.NodePools {
		desired[np.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(in.Live.NodePools)) {
		np := in.Live.NodePools[name]
		if desired[name] || !np.DeletionTimestamp.IsZero() {
			continue
		}
		step := Step{Kind: KindNodePool, Name: name, LiveObject: np}
		switch in.Class.Spec.PrunePolicy {
		case v1alpha1.PruneOrphan:
			live, err := render.CleanJSON(np)
			if err != nil {
				return nil, err
			}
			step.Action, step.Live, step.Object = Orphan, live, orphaned(live, in.Class)
		case v1alpha1.PruneRetire:
			switch {
			case np.Status.Nodes != nil && *np.Status.Nodes == 0 && len(in.Live.NodeClaims[name]) == 0:
				step.Action = Delete
			case metav1.HasAnnotation(np.ObjectMeta, v1alpha1.AnnotationRetired) && zeroLimits(np.Spec.Limits):
				step.Action = Retiring
			default:
				live, err := render.CleanJSON(np)
				if err != nil {
					return nil, err
				}
				step.Action, step.Live, step.Object = Retire, live, retired(live, np.Spec.Limits)
				step.Changes = diff.Changes(step.Object, live)
			}
		default:
			step.Action = Delete
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// retired is the live NodePool with every limit zero (cpu at least) and the retirement
// mark that lets a later render revive it.
func retired(live map[string]any, limits karpv1.Limits) map[string]any {
	out := copyMap(live)
	spec := copyMap(mapAt(out, "spec"))
	zero := map[string]any{string(corev1.ResourceCPU): "0"}
	for name := range limits {
		zero[string(name)] = "0"
	}
	spec["limits"] = zero
	out["spec"] = spec
	md := mapAt(out, "metadata")
	ann := copyMap(mapAt(md, "annotations"))
	ann[v1alpha1.AnnotationRetired] = "true"
	md["annotations"] = ann
	delete(md, "managedFields")
	return out
}

// orphaned is the live object without Poolsmith's labels and the class's owner reference.
func orphaned(live map[string]any, wc *v1alpha1.WorkloadClass) map[string]any {
	out := copyMap(live)
	md := mapAt(out, "metadata")
	labels := copyMap(mapAt(md, "labels"))
	delete(labels, v1alpha1.LabelManagedBy)
	delete(labels, v1alpha1.LabelClass)
	setOrDelete(md, "labels", labels)
	var refs []any
	for _, r := range sliceAt(md, "ownerReferences") {
		if ref, ok := r.(map[string]any); !ok || ref["uid"] != string(wc.UID) {
			refs = append(refs, r)
		}
	}
	if refs == nil {
		delete(md, "ownerReferences")
	} else {
		md["ownerReferences"] = refs
	}
	delete(md, "managedFields")
	return out
}

func zeroLimits(limits karpv1.Limits) bool {
	cpu, ok := limits[corev1.ResourceCPU]
	if !ok || !cpu.IsZero() {
		return false
	}
	for _, q := range limits {
		if !q.IsZero() {
			return false
		}
	}
	return true
}

// OwnerReference is the controller reference every child carries to its class.
func OwnerReference(wc *v1alpha1.WorkloadClass) map[string]any {
	return map[string]any{
		"apiVersion":         v1alpha1.GroupVersion.String(),
		"kind":               "WorkloadClass",
		"name":               wc.Name,
		"uid":                string(wc.UID),
		"controller":         true,
		"blockOwnerDeletion": true,
	}
}

// KindOf is the kind of a typed child.
func KindOf(obj client.Object) string {
	switch obj.(type) {
	case *karpv1.NodePool:
		return KindNodePool
	case *awsv1.EC2NodeClass:
		return KindNodeClass
	case *karpv1alpha1.NodeOverlay:
		return KindNodeOverlay
	case *v1alpha1.AccessRule:
		return KindAccessRule
	case *appsv1.Deployment:
		return KindDeployment
	case *corev1.PodTemplate:
		return KindPodTemplate
	case *cbv1beta1.CapacityBuffer:
		return KindCapacityBuffer
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

func prefixed(prefix string, changes []diff.Change) []diff.Change {
	for i := range changes {
		changes[i].Path = prefix + "." + changes[i].Path
	}
	return changes
}

func mapAt(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

func sliceAt(m map[string]any, key string) []any {
	v, _ := m[key].([]any)
	return v
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if mm, ok := v.(map[string]any); ok {
			v = copyMap(mm)
		}
		out[k] = v
	}
	return out
}

func setOrDelete(m map[string]any, key string, v map[string]any) {
	if len(v) == 0 {
		delete(m, key)
		return
	}
	m[key] = v
}

// withLiveRungs is the AccessRule naming the class's live NodePools too (retiring, being
// deleted): their nodes carry the class's labels and taints until they are gone, and a pod
// that selects one by name must be judged like one that selects the class.
func withLiveRungs(rule *v1alpha1.AccessRule, live Children) *v1alpha1.AccessRule {
	rungs := append(slices.Clone(rule.Spec.Rungs), slices.Collect(maps.Keys(live.NodePools))...)
	slices.Sort(rungs)
	if rungs = slices.Compact(rungs); slices.Equal(rungs, rule.Spec.Rungs) {
		return rule
	}
	out := rule.DeepCopy()
	out.Spec.Rungs = rungs
	return out
}
