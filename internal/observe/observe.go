// Package observe reads what the cluster holds of a class and plans it: the children it
// controls, objects of other owners under its rendered names, and the usage its limits are
// split by. The controller (through its cache) and `poolsmith diff` (through a direct
// client) both gather a class's inputs with Source.Assemble and plan through
// Cluster.Plan, so they see the same inputs the same way.
package observe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/guardrail"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// Cluster is where a class's children are read from.
type Cluster struct {
	// Cached lists the labelled children (the manager's cache holds only those).
	Cached client.Reader
	// Direct reads past the cache, for rendered names the cache does not hold.
	Direct client.Reader
	// Capabilities say whether NodeOverlays are managed and whether AccessRules are
	// rendered, listed and pruned.
	Capabilities capabilities.Capabilities
	// Validator judges every write; nil means Karpenter's and Poolsmith's CRDs
	// (validate.Default).
	Validator plan.Validator
	// Lazy skips asking the API server about rendered names the cache does not hold when
	// the plan only creates: a create then meets AlreadyExists instead, which the executor
	// turns into the ownership check. A plan that also changes or deletes existing
	// children is always verified first, so a taken name stops it before any change.
	Lazy bool
	// ClassIndexed says Cached is the manager's cache, which indexes NodePools and
	// NodeClaims by their poolsmith.dev/class label (ClassIndex): a class's children are
	// then read from the index, not matched against every cached object's labels (one
	// scan of every class's NodePools per pass made a converge quadratic in the classes).
	// Whoever points Cached at another reader clears it: the API server knows no such
	// field.
	ClassIndexed bool
	// Memo, when set, remembers children found unchanged across passes (plan.Memo).
	Memo *plan.Memo
	// Coverage is what the class's commitments cover (Source.Assemble's Tracking): a
	// budget is judged on the effective price. Nil: every node at list.
	Coverage *Coverage
}

// Children lists the children the class controls.
func (c Cluster) Children(ctx context.Context, wc *v1alpha1.WorkloadClass) (plan.Children, error) {
	live := plan.Children{NodePools: map[string]*karpv1.NodePool{}, NodeOverlays: map[string]*karpv1alpha1.NodeOverlay{}}
	owned := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: wc.Name}
	pools := &karpv1.NodePoolList{}
	if err := c.Cached.List(ctx, pools, c.ofClass(wc.Name, owned)...); err != nil {
		return live, fmt.Errorf("listing NodePools of WorkloadClass %s: %w", wc.Name, err)
	}
	live.NodePools = controlledBy(pools.Items, wc)
	claims, err := c.NodeClaims(ctx, wc.Name)
	if err != nil {
		return live, err
	}
	live.NodeClaims = claims
	if c.Capabilities.NodeOverlays {
		overlays := &karpv1alpha1.NodeOverlayList{}
		if err := c.Cached.List(ctx, overlays, owned); err != nil {
			return live, fmt.Errorf("listing NodeOverlays of WorkloadClass %s: %w", wc.Name, err)
		}
		live.NodeOverlays = controlledBy(overlays.Items, wc)
	}
	// The EC2NodeClass is named after the class: a get, not a list of every class's.
	nc := &awsv1.EC2NodeClass{}
	switch err := c.Cached.Get(ctx, client.ObjectKey{Name: wc.Name}, nc); {
	case err == nil && metav1.IsControlledBy(nc, wc):
		live.NodeClass = nc
	case err != nil && !apierrors.IsNotFound(err):
		return live, fmt.Errorf("getting EC2NodeClass %s: %w", wc.Name, err)
	}
	if live.Headroom, err = c.headroomChildren(ctx, wc, owned); err != nil {
		return live, err
	}
	live.Policies = map[string]client.Object{}
	if !c.Capabilities.AccessRules() {
		return live, nil
	}
	// The AccessRule is named after the class, like the EC2NodeClass.
	rule := &v1alpha1.AccessRule{}
	switch err := c.Cached.Get(ctx, client.ObjectKey{Name: wc.Name}, rule); {
	case err == nil && metav1.IsControlledBy(rule, wc):
		// A typed object read straight from the API server carries no apiVersion and kind,
		// which the validator needs.
		rule.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(plan.KindAccessRule))
		live.Policies[plan.KindAccessRule+"/"+rule.Name] = rule
	case err != nil && !apierrors.IsNotFound(err):
		return live, fmt.Errorf("getting AccessRule %s: %w", wc.Name, err)
	}
	return live, nil
}

// NodeClaims lists the class's NodeClaims (they inherit poolsmith.dev/class from the
// rung's template) by the NodePool that launched them.
func (c Cluster) NodeClaims(ctx context.Context, class string) (map[string][]*karpv1.NodeClaim, error) {
	claims := &karpv1.NodeClaimList{}
	if err := c.Cached.List(ctx, claims, c.ofClass(class, client.MatchingLabels{v1alpha1.LabelClass: class})...); err != nil {
		return nil, fmt.Errorf("listing NodeClaims of WorkloadClass %s: %w", class, err)
	}
	out := map[string][]*karpv1.NodeClaim{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		pool := nc.Labels[karpv1.NodePoolLabelKey]
		out[pool] = append(out[pool], nc)
	}
	return out, nil
}

// ClassIndex is the field index of NodePools and NodeClaims by their poolsmith.dev/class
// label, which the manager's cache registers (Cluster.ClassIndexed).
const ClassIndex = "metadata.labels." + v1alpha1.LabelClass

// ClassLabel is ClassIndex's value of obj: its poolsmith.dev/class label.
func ClassLabel(obj client.Object) []string {
	if v, ok := obj.GetLabels()[v1alpha1.LabelClass]; ok {
		return []string{v}
	}
	return nil
}

// ofClass are the list options that select class's objects among those labels match: by
// the index where the cache has it (the labels still filter what it finds).
func (c Cluster) ofClass(class string, labels client.MatchingLabels) []client.ListOption {
	if c.ClassIndexed {
		return []client.ListOption{labels, client.MatchingFields{ClassIndex: class}}
	}
	return []client.ListOption{labels}
}

// ServesMutatingPolicies reports whether the API server serves
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (GA and on by default since
// Kubernetes v1.36; older servers need none of it: access rules still work without it).
func ServesMutatingPolicies(mapper meta.RESTMapper) (bool, error) {
	_, err := mapper.RESTMapping(schema.GroupKind{Group: admissionv1.GroupName, Kind: render.KindMutatingPolicy}, admissionv1.SchemeGroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("discovering MutatingAdmissionPolicy support: %w", err)
}

// headroomChildren are the class's headroom children in the headroom namespace, by
// KIND/NAME: its placeholder Deployments and, where the cluster serves CapacityBuffers,
// its PodTemplates and CapacityBuffers, whichever mechanism the manager uses now, so that
// a switch of mechanism prunes what the other left. None with --headroom=off (nothing is
// cached then).
func (c Cluster) headroomChildren(ctx context.Context, wc *v1alpha1.WorkloadClass, owned client.MatchingLabels) (map[string]client.Object, error) {
	out := map[string]client.Object{}
	if !c.Capabilities.HeadroomOn() {
		return out, nil
	}
	in := client.InNamespace(c.Capabilities.HeadroomNamespaceOrDefault())
	deployments := &appsv1.DeploymentList{}
	if err := c.Cached.List(ctx, deployments, owned, in); err != nil {
		return nil, fmt.Errorf("listing headroom Deployments of WorkloadClass %s: %w", wc.Name, err)
	}
	// As the AccessRule below: the validator needs the kind.
	keyed(out, controlledBy(deployments.Items, wc), appsv1.SchemeGroupVersion.WithKind(plan.KindDeployment))
	if !c.Capabilities.HeadroomBuffers {
		return out, nil
	}
	templates := &corev1.PodTemplateList{}
	if err := c.Cached.List(ctx, templates, owned, in); err != nil {
		return nil, fmt.Errorf("listing headroom PodTemplates of WorkloadClass %s: %w", wc.Name, err)
	}
	keyed(out, controlledBy(templates.Items, wc), corev1.SchemeGroupVersion.WithKind(plan.KindPodTemplate))
	buffers := &cbv1beta1.CapacityBufferList{}
	if err := c.Cached.List(ctx, buffers, owned, in); err != nil {
		return nil, fmt.Errorf("listing headroom CapacityBuffers of WorkloadClass %s: %w", wc.Name, err)
	}
	keyed(out, controlledBy(buffers.Items, wc), render.CapacityBufferGVK)
	return out, nil
}

// keyed adds objs to out by KIND/NAME, each with its apiVersion and kind set.
func keyed[PT client.Object](out map[string]client.Object, objs map[string]PT, gvk schema.GroupVersionKind) {
	for _, o := range objs {
		o.GetObjectKind().SetGroupVersionKind(gvk)
		out[plan.HeadroomRef(o)] = o
	}
}

// emptyHeadroom is an empty object of a headroom child's kind, to read one into.
func emptyHeadroom(obj client.Object) client.Object {
	switch obj.(type) {
	case *corev1.PodTemplate:
		return &corev1.PodTemplate{}
	case *cbv1beta1.CapacityBuffer:
		return &cbv1beta1.CapacityBuffer{}
	}
	return &appsv1.Deployment{}
}

// ServesCapacityBuffers reports whether the API server serves Karpenter's
// autoscaling.x-k8s.io/v1beta1 CapacityBuffer. The CRD comes with Karpenter whether or
// not its CapacityBuffer feature gate is on, so this says nothing about the gate.
func ServesCapacityBuffers(mapper meta.RESTMapper) (bool, error) {
	_, err := mapper.RESTMapping(render.CapacityBufferGVK.GroupKind(), render.CapacityBufferGVK.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("discovering CapacityBuffer support: %w", err)
}

// controlledBy keeps, by name, the listed objects whose controller is owner.
func controlledBy[T any, PT interface {
	*T
	client.Object
}](items []T, owner metav1.Object) map[string]PT {
	out := map[string]PT{}
	for i := range items {
		if o := PT(&items[i]); metav1.IsControlledBy(o, owner) {
			out[o.GetName()] = o
		}
	}
	return out
}

// lookup asks the API server about each rendered name live does not hold. An object the
// class controls whose labels were removed joins live (the update puts them back); any
// other object is foreign.
func (c Cluster) lookup(ctx context.Context, wc *v1alpha1.WorkloadClass, res *render.Result, live *plan.Children) ([]client.Object, error) {
	var foreign []client.Object
	check := func(want client.Object, empty client.Object, adopt func(client.Object)) error {
		err := c.Direct.Get(ctx, client.ObjectKeyFromObject(want), empty)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("checking for an existing %s %s: %w", plan.KindOf(want), want.GetName(), err)
		case metav1.IsControlledBy(empty, wc):
			adopt(empty)
		default:
			foreign = append(foreign, empty)
		}
		return nil
	}
	if live.NodeClass == nil {
		if err := check(res.NodeClass, &awsv1.EC2NodeClass{}, func(o client.Object) { live.NodeClass = o.(*awsv1.EC2NodeClass) }); err != nil {
			return nil, err
		}
	}
	for _, np := range res.NodePools {
		if _, ok := live.NodePools[np.Name]; !ok {
			if err := check(np, &karpv1.NodePool{}, func(o client.Object) { live.NodePools[o.GetName()] = o.(*karpv1.NodePool) }); err != nil {
				return nil, err
			}
		}
	}
	for _, ov := range res.NodeOverlays {
		if _, ok := live.NodeOverlays[ov.Name]; !ok {
			if err := check(ov, &karpv1alpha1.NodeOverlay{}, func(o client.Object) { live.NodeOverlays[o.GetName()] = o.(*karpv1alpha1.NodeOverlay) }); err != nil {
				return nil, err
			}
		}
	}
	if res.Headroom != nil {
		for _, obj := range res.Headroom.Objects {
			if _, ok := live.Headroom[plan.HeadroomRef(obj)]; !ok {
				if err := check(obj, emptyHeadroom(obj), func(o client.Object) {
					o.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
					live.Headroom[plan.HeadroomRef(o)] = o
				}); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, pol := range res.Policies {
		ref := plan.KindOf(pol) + "/" + pol.GetName()
		if _, ok := live.Policies[ref]; !ok {
			if err := check(pol, &v1alpha1.AccessRule{}, func(o client.Object) {
				o.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(plan.KindAccessRule))
				live.Policies[ref] = o
			}); err != nil {
				return nil, err
			}
		}
	}
	return foreign, nil
}

// Outcome is a class rendered over what the cluster holds, and its plan.
type Outcome struct {
	Result *render.Result
	Live   plan.Children
	Plan   *plan.Plan
	// Invalid are the writes the API server would refuse; when there are any, nothing of
	// the class may be written.
	Invalid []plan.Invalid
	// Budget is what the class costs now judged against its spec.budget (the render held
	// its rungs when Budget.Hold); nil without a budget.
	Budget *cost.Verdict
}

// overlaysOff is the InvalidSpec message for a class that asks for NodeOverlays the
// manager does not manage.
const overlaysOff = "this manager runs without --node-overlays (which needs Karpenter's NodeOverlay CRD and feature gate)"

// Plan renders the class (its inputs as Source.Assemble gathers them, with a Baseline)
// with the usage of its live NodePools, plans it and validates every write. The usage
// and the capabilities are the Cluster's. Render errors come back as render.Errors.
func (c Cluster) Plan(ctx context.Context, in render.Inputs) (*Outcome, error) {
	wc := in.Class
	live, err := c.Children(ctx, wc)
	if err != nil {
		return nil, err
	}
	// The guardrails are judged before the render, with the API server's own policy: a
	// class a later Baseline edit put out of bounds changes none of its children.
	if err := guardrail.Judge(in.Baseline, wc); err != nil {
		return nil, err
	}
	in.Options.Usage = live.Usage()
	in.Options.Capabilities = c.Capabilities
	budget := judgeBudget(in, live, c.Coverage)
	in.Options.HoldAtUsage = budget != nil && budget.Hold
	if budget != nil && !budget.Hold && budget.Mode == v1alpha1.BudgetEnforce {
		left := max(0, budget.Budget-budget.PerHour)
		in.Options.BudgetLeft = &left
	}
	res, err := in.Render()
	if err != nil {
		return nil, err
	}
	if err := c.existingRungs(ctx, res, live); err != nil {
		return nil, err
	}
	if len(res.NodeOverlays) > 0 && !c.Capabilities.NodeOverlays {
		return nil, render.Errors{{Reason: v1alpha1.ReasonInvalidSpec, Field: "spec.weighting.nodeOverlays", Message: overlaysOff}}
	}
	crds, err := validate.Default()
	if err != nil {
		return nil, err
	}
	// verify asks the API server about the rendered names the cache does not hold.
	pin := plan.Input{Class: wc, Result: res, Live: live, Unverified: true, Memo: c.Memo}
	verify := func() error {
		pin.Unverified = false
		pin.Foreign, err = c.lookup(ctx, wc, res, &pin.Live)
		return err
	}
	if !c.Lazy {
		if err := verify(); err != nil {
			return nil, err
		}
	}
	p, err := plan.Compute(pin, crds)
	if err != nil {
		return nil, err
	}
	if pin.Unverified && p.Creates() && p.ChangesExisting() {
		if err := verify(); err != nil {
			return nil, err
		}
		if p, err = plan.Compute(pin, crds); err != nil {
			return nil, err
		}
	}
	live = pin.Live
	var v plan.Validator = crds
	if c.Validator != nil {
		v = c.Validator
	}
	return &Outcome{Result: res, Live: live, Plan: p, Invalid: p.Validate(v), Budget: budget}, nil
}

// judgeBudget prices the class's NodeClaims (without pod requests: the idle part plays no
// part) with the catalog the render uses, against its budget (spec.budget, else the
// Baseline's ceiling: render.ClassBudget), at their effective price (a node's covered part
// at its commitment's rate, the amortized figure showback uses); nil without a budget.
func judgeBudget(in render.Inputs, live plan.Children, cov *Coverage) *cost.Verdict {
	budget, _ := render.ClassBudget(in.Baseline, in.Class)
	if budget == nil {
		return nil
	}
	cat, region := in.Options.Catalog, in.Options.Region
	if cat == nil {
		var err error
		if cat, err = catalog.Load(); err != nil {
			return nil // the embedded catalog parses (its tests say so); render reports it if not
		}
	}
	if region == "" {
		region = catalog.DefaultRegion
	}
	v := cost.Judge(budget, cost.Compute(cov.CostInput(costInput(live.NodePools, live.NodeClaims, cat, region))).Effective)
	v.Committed = cov != nil
	return v
}

// InvalidMessage names each refused object, its fields and the API server's message.
func InvalidMessage(invalid []plan.Invalid) string {
	var msgs []string
	for _, in := range invalid {
		for _, cause := range validate.Causes(in.Err) {
			msgs = append(msgs, in.Step.Ref()+": "+cause)
		}
	}
	return strings.Join(msgs, "; ")
}

// existingRungs adds to the class's AccessRule every rung that exists without being
// rendered: the class's live NodePools (retiring, being deleted) and the rungs the live
// rule names whose NodePool is still there (orphaned, or drained by Karpenter after its
// delete): their nodes carry the class's labels and taints until they are gone, and a pod
// that selects one by name must be judged like one that selects the class.
func (c Cluster) existingRungs(ctx context.Context, res *render.Result, live plan.Children) error {
	rule := res.AccessRule()
	if rule == nil {
		return nil
	}
	rungs := map[string]bool{}
	for _, name := range rule.Spec.Rungs {
		rungs[name] = true
	}
	for name := range live.NodePools {
		rungs[name] = true
	}
	if l, ok := live.Policies[plan.KindAccessRule+"/"+rule.Name].(*v1alpha1.AccessRule); ok {
		for _, name := range l.Spec.Rungs {
			if rungs[name] {
				continue
			}
			// Orphaned NodePools carry no label, so the cache does not hold them.
			err := c.Direct.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodePool{})
			switch {
			case err == nil:
				rungs[name] = true
			case !apierrors.IsNotFound(err):
				return fmt.Errorf("checking whether NodePool %s still exists: %w", name, err)
			}
		}
	}
	rule.Spec.Rungs = slices.Sorted(maps.Keys(rungs))
	return nil
}
