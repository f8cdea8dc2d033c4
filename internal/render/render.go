package render

import (
	"encoding/json"
	"fmt"
	"strings"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/catalog"
)

// API versions of the rendered objects.
const (
	NodeClassAPIVersion = "karpenter.k8s.aws/v1"
	NodePoolAPIVersion  = "karpenter.sh/v1"
)

// Options carry what only the cluster knows. The zero value is the offline default.
type Options struct {
	// Usage is what each NodePool currently uses (its status.resources), by name. A class's
	// limit is split across rungs from it: each rung may use the class limit minus what the
	// other rungs use. Without usage every rung gets the whole class limit.
	Usage map[string]corev1.ResourceList
	// HoldAtUsage freezes every rung's limits at its Usage (the class reached its
	// spec.budget under mode Enforce, cost.Judge): Karpenter then launches nothing more
	// for the class. Lower limits would block replacing interrupted nodes no sooner.
	HoldAtUsage bool
	// BudgetLeft is what the class may still spend, US dollars per hour: its budget minus
	// what its launched NodeClaims cost, never below 0 (the manager sets it under mode
	// Enforce while the class is under its budget). Each rung's CPU limit is then capped
	// at its Usage plus the vCPUs the money left buys at the rung's dearest price per
	// vCPU, so Karpenter launches at most BudgetLeft's worth on each rung
	// before the manager prices the class again. Nil: no cap (the CLI, which does not
	// know what the class costs).
	BudgetLeft *float64
	// Region ranks the catalog's prices when it chooses families or types; default
	// us-east-1.
	Region string
	// Catalog replaces the embedded instance catalog: the priced catalog signals give
	// (signals.Apply), or a test's.
	Catalog *catalog.Catalog
	// Capabilities are what the cluster serves and the operator enables: without access
	// policies (the manager's --access-policies=false) no AccessRule is rendered and
	// spec.access is neither checked nor enforced.
	Capabilities capabilities.Capabilities
	// Headroom is the manager's headroom mechanism and namespace, and what sizes a class's
	// headroom: the time and the class's live usage. Zero: no headroom is rendered.
	Headroom HeadroomOptions
	// Commitments are the class's commitment states and entitlements (the manager tracks
	// them, observe.Tracking), or Offline (every commitment Open); zero: no coverage known,
	// so commitments rank nothing (rebalance's order) and only make the rungs they cover
	// whole WhenEmpty.
	Commitments CommitmentOptions
}

// Result is a rendered NodePool family.
type Result struct {
	// Class is the WorkloadClass's name.
	Class string
	// Profile is the resolved profile.
	Profile v1alpha1.Profile
	// CostBased is true when weights come from prices (Cost or RiskAdjustedCost).
	CostBased bool
	NodeClass *awsv1.EC2NodeClass
	// NodePools are in ladder order, most preferred first.
	NodePools []*karpv1.NodePool
	// NodeOverlays encode interruption risk for Karpenter's own choice (weighting.nodeOverlays).
	NodeOverlays []*karpv1alpha1.NodeOverlay
	// Policies hold the class's AccessRule: the parameter by which the admission policies
	// the chart installs (AdmissionPolicies) enforce spec.access and apply namespace
	// defaults. Empty with Options.Capabilities.NoAccessPolicies.
	Policies []client.Object
	Rungs    []Rung
	// Settings are the class's resolved settings beyond its objects (rebalance, access),
	// each with its origin: the controller, the CLI and lint read them from here.
	Settings Settings
	// Headroom is the class's warm capacity (spec.headroom) and its children; nil when the
	// class has none.
	Headroom *Headroom
	// Provenance has every field of the EC2NodeClass and then of each NodePool.
	Provenance Provenance
}

// Error is one reason a class cannot be rendered.
type Error struct {
	// Reason is the Synced condition reason it maps to: InvalidSpec, BaselineConflict or
	// GuardrailViolation.
	Reason string
	// Field is the offending field of the WorkloadClass (or baseline.… for the Baseline's).
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Errors are every reason a class cannot be rendered, in the order they were found.
type Errors []*Error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Reason is the Synced reason for the errors: GuardrailViolation if any is one, else
// BaselineConflict if any is one, else InvalidSpec.
func (e Errors) Reason() string {
	for _, reason := range []string{v1alpha1.ReasonGuardrailViolation, v1alpha1.ReasonBaselineConflict} {
		for _, err := range e {
			if err.Reason == reason {
				return reason
			}
		}
	}
	return v1alpha1.ReasonInvalidSpec
}

type renderer struct {
	catalog     *catalog.Catalog
	region      string
	baseline    *v1alpha1.Baseline
	class       *v1alpha1.WorkloadClass
	opts        Options
	profileName v1alpha1.Profile
	profile     ProfileDefaults
	errs        Errors

	nodeClassOrigins    origins
	resolvedCommitments *Commitments
}

func (r *renderer) invalid(field, msg string) {
	r.errs = append(r.errs, &Error{Reason: v1alpha1.ReasonInvalidSpec, Field: field, Message: msg})
}

func (r *renderer) conflict(field, msg string) {
	r.errs = append(r.errs, &Error{Reason: v1alpha1.ReasonBaselineConflict, Field: field, Message: msg})
}

// Render turns a WorkloadClass on top of its Baseline into one EC2NodeClass and a ladder
// of NodePools. It returns Errors when the class cannot be rendered.
func Render(baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass, opts Options) (*Result, error) {
	r, err := newRenderer(baseline, class, opts)
	if err != nil {
		return nil, err
	}
	r.checkName()
	nodeClass := r.renderNodeClass()
	tmpl := r.template()
	rungs := r.ladder(tmpl)
	if opts.Capabilities.AccessRules() {
		r.checkAccess(tmpl)
	}
	var headroomFields []Field
	hr := r.headroom(tmpl, rungs, func(path, value string, origin Origin) {
		headroomFields = append(headroomFields, Field{Object: "WorkloadClass/" + class.Name, Path: path, Value: value, Origin: origin})
	})
	if len(r.errs) > 0 {
		return nil, r.errs
	}

	res := &Result{Class: class.Name, Profile: r.profileName, NodeClass: nodeClass, Rungs: rungs, CostBased: r.strategy() != v1alpha1.WeightingStatic,
		Settings: Resolve(Inputs{Class: class, Baseline: baseline, Options: opts}), Headroom: hr}
	res.Settings.Fields = append(res.Settings.Fields, headroomFields...)
	nodeClassDoc, err := CleanJSON(nodeClass)
	if err != nil {
		return nil, err
	}
	res.Provenance = append(res.Provenance, trace("EC2NodeClass/"+nodeClass.Name, nodeClassDoc, r.nodeClassOrigins)...)
	for _, rung := range rungs {
		np, o := r.nodePool(tmpl, rung)
		doc, err := CleanJSON(np)
		if err != nil {
			return nil, err
		}
		res.NodePools = append(res.NodePools, np)
		res.Provenance = append(res.Provenance, trace("NodePool/"+np.Name, doc, o)...)
	}
	overlays, overlayOrigins := r.overlays(tmpl, rungs)
	for i, ov := range overlays {
		doc, err := CleanJSON(ov)
		if err != nil {
			return nil, err
		}
		res.NodeOverlays = append(res.NodeOverlays, ov)
		res.Provenance = append(res.Provenance, trace("NodeOverlay/"+ov.Name, doc, overlayOrigins[i])...)
	}
	if hr != nil {
		for _, obj := range hr.Objects {
			doc, err := CleanJSON(obj)
			if err != nil {
				return nil, err
			}
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			res.Provenance = append(res.Provenance, trace(kind+"/"+obj.GetNamespace()+"/"+obj.GetName(), doc, hr.origins(kind))...)
		}
	}
	if opts.Capabilities.AccessRules() {
		rule := r.accessRule(tmpl, rungs)
		doc, err := CleanJSON(rule)
		if err != nil {
			return nil, err
		}
		res.Policies = append(res.Policies, rule)
		o := origins{}
		o.set("", OriginComputed("access: spec.access and the class's taints and rungs"))
		o.set("metadata", OriginComputed("class"))
		res.Provenance = append(res.Provenance, trace(KindAccessRule+"/"+rule.Name, doc, o)...)
	}
	return res, nil
}

// newRenderer sets up a render of class on baseline: its profile, catalog and region.
func newRenderer(baseline *v1alpha1.Baseline, class *v1alpha1.WorkloadClass, opts Options) (*renderer, error) {
	if baseline == nil || class == nil {
		return nil, fmt.Errorf("render needs a Baseline and a WorkloadClass")
	}
	r := &renderer{baseline: baseline, class: class, opts: opts, profileName: class.Spec.Profile}
	if r.profileName == "" {
		r.profileName = v1alpha1.ProfileGeneral
	}
	profile, ok := Profiles[r.profileName]
	if !ok {
		return nil, Errors{{Reason: v1alpha1.ReasonInvalidSpec, Field: "spec.profile", Message: fmt.Sprintf("unknown profile %q", class.Spec.Profile)}}
	}
	r.profile = profile
	r.catalog, r.region = opts.Catalog, opts.Region
	if r.region == "" {
		r.region = catalog.DefaultRegion
	}
	if r.catalog == nil {
		c, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("loading the embedded catalog: %w", err)
		}
		r.catalog = c
	}
	return r, nil
}

// checkName blames a name that cannot be a class's on metadata.name, as admission does,
// before it reaches the poolsmith.dev/class label value and the children's names.
func (r *renderer) checkName() {
	name := r.class.Name
	switch {
	case name == "":
		r.invalid("metadata.name", "required")
	case len(name) > validation.LabelValueMaxLength:
		r.invalid("metadata.name", fmt.Sprintf("%q is %d characters; at most %d are allowed: it becomes the poolsmith.dev/class label value", name, len(name), validation.LabelValueMaxLength))
	default:
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			r.invalid("metadata.name", fmt.Sprintf("%q: %s", name, strings.Join(errs, "; ")))
		}
	}
}

// ownerLabels are the labels every child carries; the controller's cache selects on them.
func (r *renderer) ownerLabels() map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		v1alpha1.LabelClass:     r.class.Name,
	}
}

// AccessRule is the class's AccessRule, nil when none is rendered (or r is nil).
func (r *Result) AccessRule() *v1alpha1.AccessRule {
	if r == nil {
		return nil
	}
	for _, p := range r.Policies {
		if rule, ok := p.(*v1alpha1.AccessRule); ok {
			return rule
		}
	}
	return nil
}

// Objects are the EC2NodeClass, the NodePools in ladder order, the NodeOverlays, then the
// AccessRule, then the headroom children (when the manager's mode renders them), each as
// CleanJSON.
func (r *Result) Objects() ([]map[string]any, error) {
	objs := []any{r.NodeClass}
	for _, np := range r.NodePools {
		objs = append(objs, np)
	}
	for _, ov := range r.NodeOverlays {
		objs = append(objs, ov)
	}
	for _, p := range r.Policies {
		objs = append(objs, p)
	}
	if r.Headroom != nil {
		for _, obj := range r.Headroom.Objects {
			objs = append(objs, obj)
		}
	}
	docs := make([]map[string]any, len(objs))
	for i, o := range objs {
		doc, err := CleanJSON(o)
		if err != nil {
			return nil, err
		}
		docs[i] = doc
	}
	return docs, nil
}

// CleanJSON is an object as its JSON form, through json.Marshal (runtime's unstructured
// converter would turn a NillableDuration into base64 bytes), without status, null values
// or a null creationTimestamp. It is what the CLI prints and the controller applies.
func CleanJSON(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("marshalling %T: %w", obj, err)
	}
	// apimachinery's decoder keeps integers int64, as the API server and the validator do,
	// so rendered and live documents compare equal.
	var doc map[string]any
	if err := utiljson.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	delete(doc, "status")
	if md, ok := doc["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	dropNulls(doc)
	return doc, nil
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if child == nil {
				delete(t, k)
				continue
			}
			dropNulls(child)
			if m, ok := child.(map[string]any); ok && len(m) == 0 && k != "spec" {
				delete(t, k)
			}
		}
	case []any:
		for _, child := range t {
			dropNulls(child)
		}
	}
}
