package migrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/render"
)

// Options change what the migration writes.
type Options struct {
	// LegacyDefaults writes out the v1alpha5 webhook's defaults (on-demand, amd64, linux,
	// categories c/m/r, generation > 2) that v1 no longer adds.
	LegacyDefaults bool
}

// Result is the v1 objects and the report.
type Result struct {
	NodeClasses []*awsv1.EC2NodeClass
	NodePools   []*karpv1.NodePool
	Report      Report
}

// pending is a converted NodePool waiting for its node class's kubelet to be settled.
type pending struct {
	pool    *karpv1.NodePool
	kubelet awsv1.KubeletConfiguration
	rep     *reporter
}

// ToV1 converts every Karpenter object in objs; other kinds are ignored.
func ToV1(objs []manifest.Object, opts Options) *Result {
	res := &Result{}
	classes := map[string]*awsv1.EC2NodeClass{}
	var order []string
	addClass := func(name string, spec awsv1.EC2NodeClassSpec) {
		if _, ok := classes[name]; !ok {
			order = append(order, name)
		}
		classes[name] = &awsv1.EC2NodeClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       spec,
		}
	}
	var pools []pending
	var reps []*reporter
	for _, o := range objs {
		r := &reporter{source: o.Where()}
		switch o.GetAPIVersion() + "/" + o.GetKind() {
		case "karpenter.k8s.aws/v1alpha1/AWSNodeTemplate":
			var spec awsNodeTemplateSpec
			if decode(o, &spec, r) {
				addClass(o.GetName(), fromAWSNodeTemplate(&spec, r))
			}
		case "karpenter.k8s.aws/v1beta1/EC2NodeClass":
			var spec awsv1.EC2NodeClassSpec
			if decode(o, &spec, r) {
				addClass(o.GetName(), fromV1beta1NodeClass(spec, r))
			}
		case "karpenter.k8s.aws/v1/EC2NodeClass":
			var spec awsv1.EC2NodeClassSpec
			if decode(o, &spec, r) {
				addClass(o.GetName(), spec)
			}
		case "karpenter.sh/v1alpha5/Provisioner":
			var spec provisionerSpec
			if decode(o, &spec, r) {
				p := fromProvisioner(o.GetName(), &spec, opts, r)
				if spec.Provider != nil {
					inline := &reporter{source: r.source}
					addClass(o.GetName(), fromAWSNodeTemplate(spec.Provider, inline))
					for _, f := range inline.report {
						f.Field = strings.Replace(f.Field, "spec.", "spec.provider.", 1)
						r.report = append(r.report, f)
					}
					r.add(Info, "spec.provider", "the inline provider becomes its own EC2NodeClass %q", o.GetName())
				}
				pools = append(pools, p)
			}
		case "karpenter.sh/v1beta1/NodePool":
			var spec nodePoolV1beta1Spec
			if decode(o, &spec, r) {
				pools = append(pools, fromV1beta1NodePool(o.GetName(), &spec, r))
			}
		case "karpenter.sh/v1/NodePool":
			np := &karpv1.NodePool{}
			if decode(o, np, r) {
				np.ObjectMeta = metav1.ObjectMeta{Name: o.GetName()}
				np.Status = karpv1.NodePoolStatus{}
				karpenterDefaults(o, np, r)
				if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && strings.Contains(ref.Group, "/") {
					r.add(Warning, "spec.template.spec.nodeClassRef.group", "%q names a version, which v1 rejects: written as %q", ref.Group, strings.SplitN(ref.Group, "/", 2)[0])
					ref.Group = strings.SplitN(ref.Group, "/", 2)[0]
				}
				pools = append(pools, pending{pool: np, rep: r})
			}
		default:
			if !unsupported(o, r) {
				continue
			}
		}
		if n := len(pools); n > 0 && pools[n-1].rep == r {
			checkV1Limits(pools[n-1].pool, r)
		}
		reps = append(reps, r)
	}
	settleKubelet(pools, classes, addClass)
	for _, r := range reps {
		res.Report = append(res.Report, r.report...)
	}
	for _, name := range order {
		res.NodeClasses = append(res.NodeClasses, classes[name])
	}
	for _, p := range pools {
		res.NodePools = append(res.NodePools, p.pool)
	}
	return res
}

// migratedKinds are the Karpenter kinds migrate converts, at the versions ToV1 lists.
var migratedKinds = map[string]bool{"Provisioner": true, "AWSNodeTemplate": true, "NodePool": true, "EC2NodeClass": true}

// unsupported reports a Karpenter object migrate cannot read, so that nothing is dropped
// silently: one of the converted kinds at an unknown version is an error, another kind of
// Karpenter's groups a warning. It says whether it reported anything.
func unsupported(o manifest.Object, r *reporter) bool {
	group := o.GroupVersionKind().Group
	if group != "karpenter.sh" && group != "karpenter.k8s.aws" {
		return false
	}
	if migratedKinds[o.GetKind()] {
		r.add(Error, "apiVersion", "unsupported version %s of %s: migrate reads karpenter.sh/v1alpha5 Provisioners, karpenter.k8s.aws/v1alpha1 AWSNodeTemplates, and v1beta1 and v1 NodePools and EC2NodeClasses", o.GetAPIVersion(), o.GetKind())
	} else {
		r.add(Warning, "kind", "%s %s is not migrated: migrate converts NodePools and node classes only", o.GetAPIVersion(), o.GetKind())
	}
	return true
}

// checkV1Limits reports what the v1 NodePool CRD would refuse in a migrated pool and no
// conversion can fix.
func checkV1Limits(np *karpv1.NodePool, r *reporter) {
	if w := np.Spec.Weight; w != nil && (*w < 1 || *w > 100) {
		r.add(Error, "spec.weight", "%d is outside 1..100, which v1 NodePools require; choose a weight in that range, keeping the order of your pools", *w)
	}
	for _, d := range []struct {
		field string
		value karpv1.NillableDuration
	}{
		{"spec.template.spec.expireAfter", np.Spec.Template.Spec.ExpireAfter},
		{"spec.disruption.consolidateAfter", np.Spec.Disruption.ConsolidateAfter},
	} {
		if d.value.Duration != nil && *d.value.Duration < 0 {
			r.add(Error, d.field, "%s is negative, which v1 refuses", d.value.Duration)
		}
	}
}

// durationPattern is the v1 NodePool CRD's pattern for expireAfter and consolidateAfter.
var durationPattern = regexp.MustCompile(`^(([0-9]+(s|m|h))+|Never)$`)

// maxSeconds is the longest duration v1 can hold (Go's time.Duration: about 292 years).
const maxSeconds = int64(math.MaxInt64 / int64(time.Second))

// secondsDuration converts an old TTL in seconds into a v1 duration; ok is false, with an
// error naming the field, for what v1 cannot hold.
func secondsDuration(field string, secs int64, r *reporter) (d karpv1.NillableDuration, ok bool) {
	switch {
	case secs < 0:
		r.add(Error, field, "%d is negative; a v1 duration cannot be: use 0 or a positive number of seconds", secs)
		return d, false
	case secs > maxSeconds:
		r.add(Error, field, "%d seconds is longer than a v1 duration can hold (at most %d, about 292 years); remove it to never expire", secs, maxSeconds)
		return d, false
	}
	return karpv1.MustParseNillableDuration(fmt.Sprintf("%ds", secs)), true
}

// stringDuration reads a v1beta1 duration as v1 would accept it; ok is false, with an
// error naming the field, for anything else.
func stringDuration(field, value string, r *reporter) (d karpv1.NillableDuration, ok bool) {
	if !durationPattern.MatchString(value) {
		r.add(Error, field, "%q is not a duration v1 accepts: write whole numbers of h, m and s (e.g. 504h for 3 weeks), or Never", value)
		return d, false
	}
	if value != karpv1.Never {
		if _, err := time.ParseDuration(value); err != nil {
			r.add(Error, field, "%q cannot be held by a v1 duration (at most about 292 years): %v", value, err)
			return d, false
		}
	}
	return karpv1.MustParseNillableDuration(value), true
}

// decode reads the object (or its spec) leniently; fields the migration does not know are
// reported as dropped, never silently.
func decode(o manifest.Object, into any, r *reporter) bool {
	raw := o.Raw
	if _, whole := into.(*karpv1.NodePool); !whole {
		var doc struct {
			Spec json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(o.Raw, &doc); err != nil {
			r.add(Error, "spec", "%v", err)
			return false
		}
		raw = doc.Spec
	}
	strict, err := sigsjson.UnmarshalStrict(raw, into)
	if err != nil {
		r.add(Error, "spec", "cannot be read: %v", err)
		return false
	}
	for _, e := range strict {
		r.add(Warning, "spec", "dropped, no known mapping: %v", e)
	}
	return true
}

// legacyRequirements are the defaults the v1alpha5 webhook added to every Provisioner.
var legacyRequirements = []karpv1.NodeSelectorRequirementWithMinValues{
	{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
	{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
	{Key: awsv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
	{Key: awsv1.LabelInstanceGeneration, Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}},
}

func fromProvisioner(name string, s *provisionerSpec, opts Options, r *reporter) pending {
	np := newNodePool(name)
	t := &np.Spec.Template
	t.Labels = s.Labels
	t.Annotations = doNotDisrupt(s.Annotations, r)
	t.Spec.Taints, t.Spec.StartupTaints = s.Taints, s.StartupTaints
	keys := map[string]bool{}
	for _, req := range s.Requirements {
		if req.Key == "karpenter.sh/provisioner-name" {
			r.add(Warning, "spec.requirements[karpenter.sh/provisioner-name]", "dropped: karpenter.sh/nodepool replaces it and is restricted in NodePools; move workload nodeSelectors and affinities from karpenter.sh/provisioner-name to karpenter.sh/nodepool")
			continue
		}
		keys[req.Key] = true
		t.Spec.Requirements = append(t.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: req.Key, Operator: req.Operator, Values: req.Values})
	}
	explicit := keys[awsv1.LabelInstanceFamily] || keys[corev1.LabelInstanceTypeStable]
	for _, def := range legacyRequirements {
		if keys[def.Key] || (explicit && (def.Key == awsv1.LabelInstanceCategory || def.Key == awsv1.LabelInstanceGeneration)) {
			continue
		}
		if opts.LegacyDefaults {
			t.Spec.Requirements = append(t.Spec.Requirements, def)
			r.add(Info, "spec.requirements["+def.Key+"]", "the v1alpha5 webhook defaulted it to %s %v; written out, as v1 adds no such default", def.Operator, def.Values)
		} else {
			r.add(Warning, "spec.requirements["+def.Key+"]", "v1alpha5 defaulted it to %s %v; without it (--no-legacy-defaults) v1 allows any value", def.Operator, def.Values)
		}
	}
	ref := name
	switch {
	case s.ProviderRef != nil:
		ref = s.ProviderRef.Name
	case s.Provider == nil:
		r.add(Error, "spec.providerRef", "neither providerRef nor provider: a v1 NodePool needs an EC2NodeClass")
	}
	t.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: ref}
	if s.Limits != nil {
		np.Spec.Limits = karpv1.Limits(s.Limits.Resources)
	}
	np.Spec.Weight = s.Weight

	enabled := s.Consolidation != nil && ptr.Deref(s.Consolidation.Enabled, false)
	switch {
	case enabled && s.TTLSecondsAfterEmpty != nil:
		r.add(Error, "spec.ttlSecondsAfterEmpty", "set together with consolidation.enabled, which v1alpha5 did not allow")
	case enabled:
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
		r.add(Info, "spec.consolidation.enabled", "becomes consolidationPolicy WhenEmptyOrUnderutilized with consolidateAfter 0s")
	case s.TTLSecondsAfterEmpty != nil:
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		np.Spec.Disruption.ConsolidateAfter, _ = secondsDuration("spec.ttlSecondsAfterEmpty", *s.TTLSecondsAfterEmpty, r)
		r.add(Info, "spec.ttlSecondsAfterEmpty", "becomes consolidationPolicy WhenEmpty with consolidateAfter %ds", *s.TTLSecondsAfterEmpty)
	default:
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(karpv1.Never)
		r.add(Info, "spec.consolidation", "neither consolidation nor ttlSecondsAfterEmpty was set, so nothing was consolidated; kept off with consolidateAfter Never")
	}
	if s.TTLSecondsUntilExpired != nil {
		t.Spec.ExpireAfter, _ = secondsDuration("spec.ttlSecondsUntilExpired", *s.TTLSecondsUntilExpired, r)
		r.add(Warning, "spec.ttlSecondsUntilExpired", "becomes expireAfter %ds; in v1 expiry is forceful: it ignores disruption budgets and do-not-disrupt, so set terminationGracePeriod to bound the drain", *s.TTLSecondsUntilExpired)
	} else {
		t.Spec.ExpireAfter = karpv1.MustParseNillableDuration(karpv1.Never)
		r.add(Info, "spec.ttlSecondsUntilExpired", "unset, so nodes never expired; kept with expireAfter Never (v1 would default to 720h)")
	}
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: render.KarpenterDefaultBudgetNodes}}
	r.add(Info, "spec.disruption.budgets", "v1alpha5 had no budgets; v1 lets at most 10%% of nodes be disrupted at once, written out")
	kubelet := awsv1.KubeletConfiguration(s.KubeletConfiguration)
	if _, ok := kubelet["containerRuntime"]; ok {
		delete(kubelet, "containerRuntime")
		r.add(Warning, "spec.kubeletConfiguration.containerRuntime", "dropped: v1 supports containerd only")
	}
	return pending{pool: np, kubelet: kubelet, rep: r}
}

func fromV1beta1NodePool(name string, s *nodePoolV1beta1Spec, r *reporter) pending {
	np := newNodePool(name)
	t := &np.Spec.Template
	t.Labels, t.Annotations = s.Template.Metadata.Labels, doNotDisrupt(s.Template.Metadata.Annotations, r)
	ts := s.Template.Spec
	t.Spec.Taints, t.Spec.StartupTaints, t.Spec.Requirements = ts.Taints, ts.StartupTaints, ts.Requirements
	ref := name
	if ts.NodeClassRef != nil {
		ref = ts.NodeClassRef.Name
	}
	t.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: ref}
	np.Spec.Limits, np.Spec.Weight = karpv1.Limits(s.Limits), s.Weight
	np.Spec.Disruption.ConsolidationPolicy = render.KarpenterDefaultConsolidationPolicy
	np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(render.KarpenterDefaultConsolidateAfter)
	t.Spec.ExpireAfter = karpv1.MustParseNillableDuration(render.KarpenterDefaultExpireAfter)
	if d := s.Disruption; d != nil {
		switch d.ConsolidationPolicy {
		case "WhenUnderutilized":
			r.add(Info, "spec.disruption.consolidationPolicy", "WhenUnderutilized is WhenEmptyOrUnderutilized in v1, with consolidateAfter 0s as before")
		case "WhenEmpty":
			np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
			if d.ConsolidateAfter != nil {
				if after, ok := stringDuration("spec.disruption.consolidateAfter", *d.ConsolidateAfter, r); ok {
					np.Spec.Disruption.ConsolidateAfter = after
				}
			}
		}
		if d.ExpireAfter != nil {
			if expire, ok := stringDuration("spec.disruption.expireAfter", *d.ExpireAfter, r); ok {
				t.Spec.ExpireAfter = expire
			}
			r.add(Warning, "spec.disruption.expireAfter", "moves to spec.template.spec.expireAfter; in v1 expiry is forceful: it ignores disruption budgets and do-not-disrupt, so set terminationGracePeriod to bound the drain")
		}
		np.Spec.Disruption.Budgets = d.Budgets
	}
	if len(np.Spec.Disruption.Budgets) == 0 {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: render.KarpenterDefaultBudgetNodes}}
	}
	return pending{pool: np, kubelet: awsv1.KubeletConfiguration(ts.Kubelet), rep: r}
}

// karpenterDefaults writes out the defaults Karpenter's CRD gives a v1 NodePool for what
// the input leaves out, so that nothing depends on a hidden default (a NillableDuration
// left empty would even read as Never).
func karpenterDefaults(o manifest.Object, np *karpv1.NodePool, r *reporter) {
	set := func(path ...string) bool {
		_, found, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
		return found
	}
	d := &np.Spec.Disruption
	if !set("spec", "template", "spec", "expireAfter") {
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(render.KarpenterDefaultExpireAfter)
		r.add(Info, "spec.template.spec.expireAfter", "unset: Karpenter's default 720h written out")
	}
	if !set("spec", "disruption", "consolidationPolicy") {
		d.ConsolidationPolicy = render.KarpenterDefaultConsolidationPolicy
		r.add(Info, "spec.disruption.consolidationPolicy", "unset: Karpenter's default WhenEmptyOrUnderutilized written out")
	}
	if !set("spec", "disruption", "consolidateAfter") {
		d.ConsolidateAfter = karpv1.MustParseNillableDuration(render.KarpenterDefaultConsolidateAfter)
		r.add(Info, "spec.disruption.consolidateAfter", "unset: Karpenter's default 0s written out")
	}
	if !set("spec", "disruption", "budgets") {
		d.Budgets = []karpv1.Budget{{Nodes: render.KarpenterDefaultBudgetNodes}}
		r.add(Info, "spec.disruption.budgets", "unset: Karpenter's default of 10%% of nodes written out")
	}
}

func newNodePool(name string) *karpv1.NodePool {
	return &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
}

// doNotDisrupt maps the old do-not-evict and do-not-consolidate node annotations to v1's
// karpenter.sh/do-not-disrupt.
func doNotDisrupt(annotations map[string]string, r *reporter) map[string]string {
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		switch k {
		case "karpenter.sh/do-not-evict", "karpenter.sh/do-not-consolidate":
			out["karpenter.sh/do-not-disrupt"] = "true"
			r.add(Warning, "annotations["+k+"]", "becomes karpenter.sh/do-not-disrupt: \"true\", which also blocks drift and expiry-driven drains until terminationGracePeriod; pods with the old annotation must switch to it too")
		default:
			out[k] = annotations[k]
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// settleKubelet moves NodePool kubelet settings into their EC2NodeClass, as v1 requires.
// Pools that share a node class but not kubelet settings get a copy each.
func settleKubelet(pools []pending, classes map[string]*awsv1.EC2NodeClass, addClass func(string, awsv1.EC2NodeClassSpec)) {
	byClass := map[string][]pending{}
	for _, p := range pools {
		byClass[p.pool.Spec.Template.Spec.NodeClassRef.Name] = append(byClass[p.pool.Spec.Template.Spec.NodeClassRef.Name], p)
	}
	for _, name := range slices.Sorted(maps.Keys(byClass)) {
		group := byClass[name]
		nc, ok := classes[name]
		if !ok {
			for _, p := range group {
				p.rep.add(Warning, "spec.nodeClassRef", "EC2NodeClass %q is not in the input; the NodePool refers to it as it is", name)
			}
			continue
		}
		distinct := map[string]awsv1.KubeletConfiguration{}
		for _, p := range group {
			if len(p.kubelet) > 0 {
				distinct[p.kubelet.String()] = p.kubelet
			}
		}
		switch {
		case len(distinct) == 0:
		case len(distinct) == 1 && allSame(group):
			for _, k := range distinct {
				nc.Spec.Kubelet = mergeKubelet(nc.Spec.Kubelet, k)
			}
			for _, p := range group {
				if len(p.kubelet) > 0 {
					p.rep.add(Info, "kubelet", "moved to EC2NodeClass %q, as v1 configures the kubelet there", name)
				}
			}
		default:
			for _, p := range group {
				if len(p.kubelet) == 0 {
					continue
				}
				clone := render.ShortenName(name + "-" + p.pool.Name)
				spec := *nc.Spec.DeepCopy()
				spec.Kubelet = mergeKubelet(spec.Kubelet, p.kubelet)
				addClass(clone, spec)
				p.pool.Spec.Template.Spec.NodeClassRef.Name = clone
				p.rep.add(Warning, "kubelet", "NodePools sharing EC2NodeClass %q have different kubelet settings, and v1 keeps them in the node class: this pool gets its own copy %q", name, clone)
			}
		}
	}
}

func allSame(group []pending) bool {
	for _, p := range group[1:] {
		if !reflect.DeepEqual(p.kubelet, group[0].kubelet) {
			return false
		}
	}
	return true
}

func mergeKubelet(base, add awsv1.KubeletConfiguration) awsv1.KubeletConfiguration {
	out := awsv1.KubeletConfiguration{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = apiextensionsv1.JSON{Raw: v.Raw}
	}
	return out
}
