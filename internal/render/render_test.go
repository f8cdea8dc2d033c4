package render_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/render"
)

func mustRender(t *testing.T, b *v1alpha1.Baseline, wc *v1alpha1.WorkloadClass) *render.Result {
	t.Helper()
	res, err := render.Render(b, wc, render.Options{})
	if err != nil {
		t.Fatalf("render %s: %v", wc.Name, err)
	}
	return res
}

// renderError renders and expects exactly the failure named by reason and field.
func renderError(t *testing.T, b *v1alpha1.Baseline, wc *v1alpha1.WorkloadClass, reason, field, message string) {
	t.Helper()
	_, err := render.Render(b, wc, render.Options{})
	var errs render.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want render.Errors, got %v", err)
	}
	for _, e := range errs {
		if e.Reason == reason && e.Field == field && strings.Contains(e.Message, message) {
			return
		}
	}
	t.Fatalf("want %s on %s containing %q, got %v", reason, field, message, err)
}

func provenanceOf(res *render.Result, object, path string) render.Origin {
	for _, f := range res.Provenance {
		if f.Object == object && f.Path == path {
			return f.Origin
		}
	}
	return ""
}

// --- Merge rules: one test per row of the merge table. ---

func TestMergeBaselineOnlyFieldsCannotBeOverridden(t *testing.T) {
	// The class type has no field for them, so no manifest can even say it.
	baselineOnly := []string{"role", "instanceProfile", "subnetSelectorTerms", "securityGroupSelectorTerms",
		"metadataOptions", "associatePublicIPAddress", "capacityReservationSelectorTerms", "placementGroupSelector"}
	overrides := reflect.TypeOf(v1alpha1.NodeClassOverrides{})
	for i := 0; i < overrides.NumField(); i++ {
		name, _, _ := strings.Cut(overrides.Field(i).Tag.Get("json"), ",")
		for _, forbidden := range baselineOnly {
			if name == forbidden {
				t.Errorf("NodeClassOverrides has Baseline-only field %s", name)
			}
		}
	}

	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodeClass.AssociatePublicIPAddress = ptr.To(false)
		b.Spec.NodeClass.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123456789abcdef0"}}
		b.Spec.NodeClass.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: ptr.To("pg")}
	})
	wc := class("everything", v1alpha1.ProfileGPU, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
		n.AMIFamily = ptr.To("AL2023")
		n.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("300Gi"))}}}
		n.Tags = v1alpha1.Tags{"workload": "ml"}
		n.DetailedMonitoring = ptr.To(true)
	}))
	got := mustRender(t, b, wc).NodeClass.Spec
	want := b.Spec.NodeClass
	if got.Role != want.Role || got.InstanceProfile != nil {
		t.Errorf("role/instanceProfile = %q/%v, want %q/nil", got.Role, got.InstanceProfile, want.Role)
	}
	for name, pair := range map[string][2]any{
		"subnetSelectorTerms":              {got.SubnetSelectorTerms, want.SubnetSelectorTerms},
		"securityGroupSelectorTerms":       {got.SecurityGroupSelectorTerms, want.SecurityGroupSelectorTerms},
		"associatePublicIPAddress":         {got.AssociatePublicIPAddress, want.AssociatePublicIPAddress},
		"capacityReservationSelectorTerms": {got.CapacityReservationSelectorTerms, want.CapacityReservationSelectorTerms},
		"placementGroupSelector":           {got.PlacementGroupSelector, want.PlacementGroupSelector},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s = %v, want the Baseline's %v", name, pair[0], pair[1])
		}
	}
	// Set fields are kept; the rest are filled with Karpenter's defaults.
	if *got.MetadataOptions.HTTPPutResponseHopLimit != 2 || *got.MetadataOptions.HTTPTokens != "required" || *got.MetadataOptions.HTTPEndpoint != "enabled" {
		t.Errorf("metadataOptions = %+v", got.MetadataOptions)
	}
}

func TestMergeAMISelectorTermsReplacedAsAWhole(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodeClass.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
		b.Spec.NodeClass.AMIFamily = ptr.To("Bottlerocket")
	})
	custom := []awsv1.AMISelectorTerm{{Tags: map[string]string{"ami": "gpu"}}, {Name: "my-ami-*", Owner: "self"}}
	got := mustRender(t, b, class("gpu", v1alpha1.ProfileGPU, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.AMISelectorTerms = custom
		n.AMIFamily = ptr.To("AL2023")
	}))).NodeClass.Spec
	if !reflect.DeepEqual(got.AMISelectorTerms, custom) || ptr.Deref(got.AMIFamily, "") != "AL2023" {
		t.Errorf("ami = %v / %v, want the class's terms and AL2023", got.AMISelectorTerms, ptr.Deref(got.AMIFamily, ""))
	}

	// An alias from the class drops the Baseline's amiFamily, which would contradict it.
	got = mustRender(t, b, class("al", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	}))).NodeClass.Spec
	if got.AMIFamily != nil {
		t.Errorf("amiFamily = %q, want none with the class's alias", *got.AMIFamily)
	}

	renderError(t, b, class("noalias", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0123456789abcdef0"}}
	})), v1alpha1.ReasonInvalidSpec, "spec.nodeClass.amiFamily", "is required")
}

func TestMergeBlockDevicesByDeviceNameAndFieldByField(t *testing.T) {
	res := mustRender(t, baseline(), class("big", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{
			{DeviceName: ptr.To("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("200Gi")), IOPS: ptr.To[int64](6000)}},
			{DeviceName: ptr.To("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("500Gi"))}},
		}
	})))
	bdm := res.NodeClass.Spec.BlockDeviceMappings
	if len(bdm) != 2 {
		t.Fatalf("got %d mappings, want 2", len(bdm))
	}
	root := bdm[0].EBS
	if root.VolumeSize.String() != "200Gi" || *root.IOPS != 6000 {
		t.Errorf("class fields not applied: size %s iops %v", root.VolumeSize, root.IOPS)
	}
	if !*root.Encrypted || *root.KMSKeyID != "arn:aws:kms:us-east-1:111122223333:key/prod" || *root.VolumeType != "gp3" || !bdm[0].RootVolume {
		t.Errorf("Baseline fields dropped from the root volume: %+v", root)
	}
	if *bdm[1].DeviceName != "/dev/xvdb" || bdm[1].EBS.VolumeSize.String() != "500Gi" {
		t.Errorf("class-only device not appended: %+v", bdm[1])
	}
	if o := provenanceOf(res, "EC2NodeClass/big", "spec.blockDeviceMappings[/dev/xvda].ebs.kmsKeyID"); o != render.OriginBaseline {
		t.Errorf("kmsKeyID origin = %q, want baseline", o)
	}
	if o := provenanceOf(res, "EC2NodeClass/big", "spec.blockDeviceMappings[/dev/xvda].ebs.volumeSize"); o != render.OriginClass {
		t.Errorf("volumeSize origin = %q, want class", o)
	}
}

func TestMergeTagsKeyByKeyWithMandatoryBaselineKeys(t *testing.T) {
	res := mustRender(t, baseline(), class("tagged", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.Tags = v1alpha1.Tags{"workload": "web", "team": "platform"} // same value as the Baseline: fine
	})))
	want := map[string]string{"cost-center": "1234", "team": "platform", "workload": "web", render.TagClass: "tagged"}
	if !reflect.DeepEqual(res.NodeClass.Spec.Tags, want) {
		t.Errorf("tags = %v, want %v", res.NodeClass.Spec.Tags, want)
	}
}

func TestMergeKubeletKeyByKeyClassWinsAndValidated(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodeClass.Kubelet = awsv1.KubeletConfiguration{
			"maxPods":                     apiextensionsv1.JSON{Raw: []byte(`110`)},
			"evictionHard":                apiextensionsv1.JSON{Raw: []byte(`{"memory.available":"5%","nodefs.available":"10%"}`)},
			"imageGCHighThresholdPercent": apiextensionsv1.JSON{Raw: []byte(`85`)},
		}
	})
	res := mustRender(t, b, class("kube", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.Kubelet = awsv1.KubeletConfiguration{
			"maxPods":      apiextensionsv1.JSON{Raw: []byte(`58`)},
			"evictionHard": apiextensionsv1.JSON{Raw: []byte(`{"memory.available":"10%"}`)},
		}
	})))
	got, _ := json.Marshal(res.NodeClass.Spec.Kubelet)
	want := `{"evictionHard":{"memory.available":"10%","nodefs.available":"10%"},"imageGCHighThresholdPercent":85,"maxPods":58}`
	if string(got) != want {
		t.Errorf("kubelet = %s, want %s", got, want)
	}
	renderError(t, b, class("badkube", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.Kubelet = awsv1.KubeletConfiguration{"evictionHard": apiextensionsv1.JSON{Raw: []byte(`{"bogus.available":"5%"}`)}}
	})), v1alpha1.ReasonInvalidSpec, "spec.nodeClass.kubelet", "isn't a valid eviction signal")
}

func TestMergeUserDataFromOneLayerOnly(t *testing.T) {
	script := "#!/bin/bash\necho class\n"
	res := mustRender(t, baseline(), class("ud", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) { n.UserData = &script })))
	if ptr.Deref(res.NodeClass.Spec.UserData, "") != script {
		t.Errorf("userData = %v, want the class's", res.NodeClass.Spec.UserData)
	}
	withUD := baseline(func(b *v1alpha1.Baseline) { b.Spec.NodeClass.UserData = ptr.To("#!/bin/bash\necho baseline\n") })
	if ud := mustRender(t, withUD, class("keep", v1alpha1.ProfileGeneral)).NodeClass.Spec.UserData; !strings.Contains(*ud, "baseline") {
		t.Errorf("userData = %q, want the Baseline's", *ud)
	}
	renderError(t, withUD, class("ud", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) { n.UserData = &script })),
		v1alpha1.ReasonBaselineConflict, "spec.nodeClass.userData", "the Baseline sets userData")
}

func TestMergeDetailedMonitoringAndInstanceStorePolicyFromClass(t *testing.T) {
	raid := awsv1.InstanceStorePolicyRAID0
	got := mustRender(t, baseline(), class("nvme", v1alpha1.ProfileMemoryOptimized, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.DetailedMonitoring = ptr.To(true)
		n.InstanceStorePolicy = &raid
	}))).NodeClass.Spec
	if !ptr.Deref(got.DetailedMonitoring, false) || ptr.Deref(got.InstanceStorePolicy, "") != raid {
		t.Errorf("detailedMonitoring %v instanceStorePolicy %v", got.DetailedMonitoring, got.InstanceStorePolicy)
	}
}

func TestMergeLabelsAndAnnotationsKeyByKeyWithMandatoryBaselineKeys(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.Annotations = v1alpha1.NodeAnnotations{"example.com/owner": "platform"}
	})
	res := mustRender(t, b, class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/team": "web"}
		wc.Spec.Annotations = v1alpha1.NodeAnnotations{"example.com/pager": "web-oncall"}
	}))
	for _, np := range res.NodePools {
		l, a := np.Spec.Template.Labels, np.Spec.Template.Annotations
		if l["example.com/environment"] != "prod" || l["example.com/team"] != "web" || l[v1alpha1.LabelClass] != "web" || l[v1alpha1.LabelRung] != np.Name {
			t.Errorf("%s labels = %v", np.Name, l)
		}
		if a["example.com/owner"] != "platform" || a["example.com/pager"] != "web-oncall" {
			t.Errorf("%s annotations = %v", np.Name, a)
		}
	}
	renderError(t, b, class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/environment": "dev"}
	}), v1alpha1.ReasonBaselineConflict, "spec.labels[example.com/environment]", `contradicts the Baseline's mandatory value "prod"`)
	renderError(t, b, class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Annotations = v1alpha1.NodeAnnotations{"example.com/owner": "web"}
	}), v1alpha1.ReasonBaselineConflict, "spec.annotations[example.com/owner]", "contradicts")
	renderError(t, b, class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Labels = v1alpha1.NodeLabels{"example.com/team": "not valid!"}
	}), v1alpha1.ReasonInvalidSpec, "spec.labels[example.com/team]", "not valid!")
}

func TestMergeTaintsUnionByKeyAndEffect(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.Taints = v1alpha1.Taints{taint("example.com/dedicated", "shared", corev1.TaintEffectNoSchedule)}
		b.Spec.NodePool.StartupTaints = v1alpha1.Taints{taint("example.com/agent-not-ready", "", corev1.TaintEffectNoExecute)}
	})
	res := mustRender(t, b, class("ml", v1alpha1.ProfileGPU, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Taints = v1alpha1.Taints{
			taint("example.com/dedicated", "ml", corev1.TaintEffectNoSchedule), // same (key, effect): class wins
			taint("example.com/dedicated", "ml", corev1.TaintEffectNoExecute),  // other effect: kept apart
		}
	}))
	got := res.NodePools[0].Spec.Template.Spec.Taints
	want := []corev1.Taint{
		{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule},
		{Key: render.GPUTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoExecute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("taints = %v, want %v", got, want)
	}
	if st := res.NodePools[0].Spec.Template.Spec.StartupTaints; len(st) != 1 || st[0].Key != "example.com/agent-not-ready" {
		t.Errorf("startupTaints = %v", st)
	}
}

func TestMergeDisruptionExpiryAndGracePeriodPerField(t *testing.T) {
	b := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool.TerminationGracePeriod = ptrDuration("24h")
		b.Spec.NodePool.Disruption.Budgets = []karpv1.Budget{{Nodes: "5%"}}
	})
	// GPU's profile sets WhenEmpty/10m; the class sets consolidateAfter only.
	res := mustRender(t, b, class("ml", v1alpha1.ProfileGPU, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Disruption = &v1alpha1.Disruption{ConsolidateAfter: ptr.To(karpv1.MustParseNillableDuration("30m"))}
		wc.Spec.ExpireAfter = ptr.To(karpv1.MustParseNillableDuration("336h"))
	}))
	np := res.NodePools[0]
	if np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty {
		t.Errorf("policy = %s, want the profile's WhenEmpty", np.Spec.Disruption.ConsolidationPolicy)
	}
	if np.Spec.Disruption.ConsolidateAfter.String() != "30m0s" || np.Spec.Template.Spec.ExpireAfter.String() != "336h0m0s" {
		t.Errorf("consolidateAfter %s expireAfter %s, want the class's", np.Spec.Disruption.ConsolidateAfter, np.Spec.Template.Spec.ExpireAfter)
	}
	if np.Spec.Template.Spec.TerminationGracePeriod.Duration.String() != "24h0m0s" || np.Spec.Disruption.Budgets[0].Nodes != "5%" {
		t.Errorf("grace period %v budgets %v, want the Baseline's", np.Spec.Template.Spec.TerminationGracePeriod, np.Spec.Disruption.Budgets)
	}
	for path, want := range map[string]render.Origin{
		"spec.disruption.consolidationPolicy": render.OriginProfile("GPU"),
		"spec.disruption.consolidateAfter":    render.OriginClass,
		"spec.template.spec.expireAfter":      render.OriginClass,
		"spec.disruption.budgets[0].nodes":    render.OriginBaseline,
	} {
		if got := provenanceOf(res, "NodePool/"+np.Name, path); got != want {
			t.Errorf("%s origin = %q, want %q", path, got, want)
		}
	}
}

func ptrDuration(s string) *metav1.Duration {
	d := karpv1.MustParseNillableDuration(s)
	return &metav1.Duration{Duration: *d.Duration}
}

// --- Karpenter's defaults are written out. ---

func TestKarpenterDefaultsAreExplicit(t *testing.T) {
	bare := baseline(func(b *v1alpha1.Baseline) {
		b.Spec.NodePool = v1alpha1.NodePoolDefaults{}
		b.Spec.NodeClass.MetadataOptions = nil
	})
	res := mustRender(t, bare, class("plain", v1alpha1.ProfileGPU))
	np := res.NodePools[0]
	if np.Spec.Template.Spec.ExpireAfter.String() != "720h0m0s" || len(np.Spec.Disruption.Budgets) != 1 || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("expireAfter %s budgets %v", np.Spec.Template.Spec.ExpireAfter, np.Spec.Disruption.Budgets)
	}
	for object, paths := range map[string][]string{
		"NodePool/" + np.Name: {"spec.template.spec.expireAfter", "spec.disruption.budgets[0].nodes"},
		"EC2NodeClass/plain":  {"spec.metadataOptions.httpTokens", "spec.metadataOptions.httpPutResponseHopLimit"},
	} {
		for _, p := range paths {
			if o := provenanceOf(res, object, p); o != render.OriginKarpenterDefault {
				t.Errorf("%s %s origin = %q, want karpenter-default", object, p, o)
			}
		}
	}
	// A bare class under General gets Karpenter's default consolidateAfter overridden by
	// the profile, and its policy from Karpenter's default.
	gen := mustRender(t, bare, class("gen", v1alpha1.ProfileGeneral)).NodePools[0]
	if gen.Spec.Disruption.ConsolidateAfter.String() != "1m0s" || gen.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("General disruption = %+v", gen.Spec.Disruption)
	}
}

// --- Regressions that motivated Poolsmith. ---

func TestRegressionGPUClassOverridingAMIKeepsBaselineIdentityNetworkAndTags(t *testing.T) {
	b := baseline()
	res := mustRender(t, b, class("gpu", v1alpha1.ProfileGPU, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-x86_64-nvidia-*", Owner: "amazon"}}
		n.AMIFamily = ptr.To("AL2023")
		n.Tags = v1alpha1.Tags{"workload": "ml"}
	})))
	got := res.NodeClass.Spec
	if got.Role != "KarpenterNodeRole-prod" {
		t.Errorf("role = %q: the AMI override dropped the instance role", got.Role)
	}
	if !reflect.DeepEqual(got.SubnetSelectorTerms, b.Spec.NodeClass.SubnetSelectorTerms) || !reflect.DeepEqual(got.SecurityGroupSelectorTerms, b.Spec.NodeClass.SecurityGroupSelectorTerms) {
		t.Errorf("network selectors changed: %v %v", got.SubnetSelectorTerms, got.SecurityGroupSelectorTerms)
	}
	for k, v := range b.Spec.NodeClass.Tags {
		if got.Tags[k] != v {
			t.Errorf("baseline tag %s = %q, want %q", k, got.Tags[k], v)
		}
	}
	if root := got.BlockDeviceMappings[0].EBS; !*root.Encrypted || root.KMSKeyID == nil || root.VolumeSize.Cmp(resource.MustParse("100Gi")) < 0 {
		t.Errorf("GPU root volume lost encryption or was not enlarged: %+v", root)
	}
}

func TestRegressionSpotOnlyClassKeepsBaselineSubnetTag(t *testing.T) {
	res := mustRender(t, baseline(), class("batch", v1alpha1.ProfileGeneral, withCapacityTypes(v1alpha1.CapacityTypeSpot)))
	if got := res.NodeClass.Spec.SubnetSelectorTerms[0].Tags["network/tier"]; got != "private" {
		t.Errorf("subnet tag network/tier = %q, want private", got)
	}
	for _, rung := range res.Rungs {
		if rung.CapacityType != v1alpha1.CapacityTypeSpot {
			t.Errorf("spot-only class rendered a %s rung", rung.CapacityType)
		}
	}
}

func TestRegressionClassTagContradictingBaselineIsAnError(t *testing.T) {
	renderError(t, baseline(), class("rogue", v1alpha1.ProfileGeneral, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
		n.Tags = v1alpha1.Tags{"cost-center": "9999"}
	})), v1alpha1.ReasonBaselineConflict, "spec.nodeClass.tags[cost-center]", `class value "9999" contradicts the Baseline's mandatory value "1234"`)
}

func TestRegressionMixedArchPrefersArm64WithinEachCapacityType(t *testing.T) {
	res := mustRender(t, baseline(), class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic}
	}))
	weight := map[string]int32{}
	for _, r := range res.Rungs {
		weight[string(r.CapacityType)+"/"+string(r.Arch)] = r.Weight
	}
	for _, ct := range []string{"spot", "on-demand"} {
		if weight[ct+"/arm64"] <= weight[ct+"/amd64"] {
			t.Errorf("%s: arm64 weight %d is not above amd64 weight %d", ct, weight[ct+"/arm64"], weight[ct+"/amd64"])
		}
	}
}

func TestRegressionRungsOfOneClassArePairwiseDisjoint(t *testing.T) {
	for _, wc := range []*v1alpha1.WorkloadClass{
		class("diverse", v1alpha1.ProfileGeneral),
		class("family", v1alpha1.ProfileGeneral, withFamilies(v1alpha1.ConsistencyFamily, "m7g", "m7i", "c7g")),
		class("type", v1alpha1.ProfileGeneral, withTypes("m7g.xlarge", "m7i.xlarge"), withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved)),
	} {
		pools := mustRender(t, baseline(), wc).NodePools
		for i := range pools {
			for j := i + 1; j < len(pools); j++ {
				a := scheduling.NewNodeSelectorRequirementsWithMinValues(pools[i].Spec.Template.Spec.Requirements...)
				b := scheduling.NewNodeSelectorRequirementsWithMinValues(pools[j].Spec.Template.Spec.Requirements...)
				if a.Intersects(b) == nil {
					t.Errorf("%s: rungs %s and %s overlap", wc.Name, pools[i].Name, pools[j].Name)
				}
			}
		}
	}
}

// --- The ladder. ---

func TestLadderNestingNamesAndStaticWeights(t *testing.T) {
	res := mustRender(t, baseline(), class("web", v1alpha1.ProfileGeneral,
		withFamilies(v1alpha1.ConsistencyFamily, "m7g", "m7i", "c7g", "zz9"), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Weighting = &v1alpha1.Weighting{Strategy: v1alpha1.WeightingStatic, Ceiling: ptr.To[int32](50)}
		}))
	var got []string
	for i, r := range res.Rungs {
		got = append(got, r.Name)
		if r.Weight != 50-int32(i) || *res.NodePools[i].Spec.Weight != r.Weight {
			t.Errorf("rung %d %s weight %d, want %d", i, r.Name, r.Weight, 50-i)
		}
	}
	// Each family goes to the architecture the catalog knows it for; an unknown one to both.
	want := []string{
		"web-spot-arm64-m7g", "web-spot-arm64-c7g", "web-spot-arm64-zz9", "web-spot-amd64-m7i", "web-spot-amd64-zz9",
		"web-on-demand-arm64-m7g", "web-on-demand-arm64-c7g", "web-on-demand-arm64-zz9", "web-on-demand-amd64-m7i", "web-on-demand-amd64-zz9",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ladder = %v, want %v", got, want)
	}
	typed := mustRender(t, baseline(), class("gpu", v1alpha1.ProfileGPU, withTypes("g6.xlarge"), withCapacityTypes(v1alpha1.CapacityTypeSpot)))
	if typed.Rungs[0].Name != "gpu-spot-amd64-g6-xlarge" {
		t.Errorf("type rung name = %s", typed.Rungs[0].Name)
	}
}

func TestCatalogChoosesTheCheapestFamiliesPerArchitecture(t *testing.T) {
	res := mustRender(t, baseline(), class("auto", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Consistency = v1alpha1.ConsistencyFamily }))
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	perArch := map[v1alpha1.Architecture][]string{}
	for _, r := range res.Rungs {
		if r.CapacityType != v1alpha1.CapacityTypeSpot {
			continue
		}
		perArch[r.Arch] = append(perArch[r.Arch], r.Slice)
		if arch, ok := cat.Arch(r.Slice); !ok || arch != string(r.Arch) {
			t.Errorf("family %s chosen for %s, catalog says %s", r.Slice, r.Arch, arch)
		}
		fam, _ := catalog.ParseFamily(r.Slice)
		if !strings.Contains("cmr", fam.Category) || fam.Generation < 6 {
			t.Errorf("family %s does not fit the General shape (c/m/r, generation >= 6)", r.Slice)
		}
	}
	if len(perArch[v1alpha1.ArchitectureARM64]) != render.ChosenPerArch || len(perArch[v1alpha1.ArchitectureAMD64]) != render.ChosenPerArch {
		t.Fatalf("chosen families = %v, want %d per architecture", perArch, render.ChosenPerArch)
	}
	// Cheapest first: each chosen family's best spot price per vCPU is no higher than the next one's.
	origin := provenanceOf(res, "NodePool/"+res.Rungs[0].Name, "spec.template.spec.requirements[karpenter.k8s.aws/instance-family]")
	if origin != "computed:catalog(cheapest 3 families per architecture by spot average price per vCPU in us-east-1)" {
		t.Errorf("origin = %q", origin)
	}
	gpu := mustRender(t, baseline(), class("gpu", v1alpha1.ProfileGPU, func(wc *v1alpha1.WorkloadClass) { wc.Spec.Consistency = v1alpha1.ConsistencyType }))
	for _, r := range gpu.Rungs {
		if ty := cat.Types[r.Slice]; ty == nil || ty.GPUMaker != "nvidia" {
			t.Errorf("GPU class chose %s", r.Slice)
		}
	}
}

func TestRungNameOver63CharactersIsHashed(t *testing.T) {
	long := strings.Repeat("a", 50)
	res := mustRender(t, baseline(), class(long, v1alpha1.ProfileGeneral, withTypes("m7i-flex.xlarge")))
	full := long + "-on-demand-amd64-m7i-flex-xlarge"
	sum := sha256.Sum256([]byte(full))
	want := full[:54] + "-" + hex.EncodeToString(sum[:])[:8]
	var found bool
	for _, r := range res.Rungs {
		if len(r.Name) > 63 {
			t.Errorf("rung name %q is %d characters", r.Name, len(r.Name))
		}
		found = found || r.Name == want
	}
	if !found {
		t.Errorf("no rung named %s", want)
	}
	if render.ShortenName("short") != "short" {
		t.Error("short names must be kept")
	}
}

func TestLadderLimits(t *testing.T) {
	b := baseline()
	renderError(t, b, class("huge", v1alpha1.ProfileGeneral, withFamilies(v1alpha1.ConsistencyFamily, "m7g", "c7g", "r7g", "m6g", "m7i", "c7i", "r7i", "m6i"),
		withCapacityTypes(v1alpha1.CapacityTypeSpot, v1alpha1.CapacityTypeOnDemand, v1alpha1.CapacityTypeReserved)),
		v1alpha1.ReasonInvalidSpec, "spec", "renders 24 rungs")
	renderError(t, b, class("wrongarch", v1alpha1.ProfileGeneral, withFamilies(v1alpha1.ConsistencyFamily, "m7i", "c7i"), withArchitectures(v1alpha1.ArchitectureARM64)),
		v1alpha1.ReasonInvalidSpec, "spec.instances.families", "none of [m7i c7i] has instance types for architectures [arm64]")
	renderError(t, b, class("nothing", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Consistency = v1alpha1.ConsistencyType
		wc.Spec.Instances = &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Min: ptr.To[int32](5000)}}
	}), v1alpha1.ReasonInvalidSpec, "spec.instances.types", "no catalog type in us-east-1 fits the class's shape")
	renderError(t, b, class("low", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Weighting = &v1alpha1.Weighting{Ceiling: ptr.To[int32](3)}
	}), v1alpha1.ReasonInvalidSpec, "spec.weighting.ceiling", "raise it to at least 4")
}

func TestFallbackExpireAfterOnlyOnFallbackRungsAndOptInPerProfile(t *testing.T) {
	for _, tc := range []struct {
		profile           v1alpha1.Profile
		first, fallback   string
		fallbackIsShorter bool
	}{
		{v1alpha1.ProfileGeneral, "720h0m0s", "24h0m0s", true},
		{v1alpha1.ProfileBurstableCI, "24h0m0s", "4h0m0s", true},
		{v1alpha1.ProfileMemoryOptimized, "720h0m0s", "48h0m0s", true},
		{v1alpha1.ProfileGPU, "720h0m0s", "720h0m0s", false},
	} {
		res := mustRender(t, baseline(), class("c", tc.profile))
		for i, r := range res.Rungs {
			got := res.NodePools[i].Spec.Template.Spec.ExpireAfter.String()
			want := tc.first
			if r.Fallback != (r.CapacityType != res.Rungs[0].CapacityType) {
				t.Errorf("%s rung %s: fallback %v, but the class's first capacity type is %s", tc.profile, r.Name, r.Fallback, res.Rungs[0].CapacityType)
			}
			if r.Fallback {
				want = tc.fallback
			}
			if got != want {
				t.Errorf("%s rung %s expireAfter = %s, want %s", tc.profile, r.Name, got, want)
			}
		}
	}
	// A class can turn it off.
	res := mustRender(t, baseline(), class("c", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.FallbackExpireAfter = ptr.To(karpv1.MustParseNillableDuration("Never"))
	}))
	for _, np := range res.NodePools {
		if np.Spec.Template.Spec.ExpireAfter.String() != "720h0m0s" {
			t.Errorf("%s expireAfter = %s with fallbackExpireAfter Never", np.Name, np.Spec.Template.Spec.ExpireAfter)
		}
	}
}

func TestClassLimitSplitAcrossRungsByUsage(t *testing.T) {
	wc := class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
	})
	res, err := render.Render(baseline(), wc, render.Options{Usage: map[string]corev1.ResourceList{
		"web-spot-arm64": {corev1.ResourceCPU: resource.MustParse("30")},
		"web-spot-amd64": {corev1.ResourceCPU: resource.MustParse("50")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"web-spot-arm64": "50", "web-spot-amd64": "70", "web-on-demand-arm64": "20", "web-on-demand-amd64": "20"}
	for _, np := range res.NodePools {
		if got := np.Spec.Limits[corev1.ResourceCPU]; got.String() != want[np.Name] {
			t.Errorf("%s cpu limit = %s, want %s", np.Name, got.String(), want[np.Name])
		}
	}
}

// A class held at its budget gets each rung's own usage as its limits (0 where it uses
// none), CPU and memory and whatever the class limits, whatever the class limit leaves.
func TestBudgetHoldFreezesEachRungAtItsUsage(t *testing.T) {
	wc := class("web", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100"), "nvidia.com/gpu": resource.MustParse("4")}
	})
	res, err := render.Render(baseline(), wc, render.Options{HoldAtUsage: true, Usage: map[string]corev1.ResourceList{
		"web-spot-arm64": {corev1.ResourceCPU: resource.MustParse("30"), corev1.ResourceMemory: resource.MustParse("60Gi"), corev1.ResourcePods: resource.MustParse("40")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range res.NodePools {
		want := karpv1.Limits{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"), "nvidia.com/gpu": resource.MustParse("0")}
		if np.Name == "web-spot-arm64" {
			want[corev1.ResourceCPU], want[corev1.ResourceMemory] = resource.MustParse("30"), resource.MustParse("60Gi")
		}
		if !equality.Semantic.DeepEqual(np.Spec.Limits, want) {
			t.Errorf("%s limits = %v, want %v", np.Name, np.Spec.Limits, want)
		}
	}
}

// With budget left, filling a rung's CPU room with any type the rung allows costs at most
// that money, and the room is no smaller than that (to a millicore): one provisioning
// round launches at most the budget left on each rung.
func TestBudgetLeftCapsEachRungsCPUAtWhatItBuys(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	prices := cat.Prices[catalog.DefaultRegion]
	used := resource.MustParse("30")
	render1 := func(left float64, mutate ...func(*v1alpha1.WorkloadClass)) *render.Result {
		t.Helper()
		res, err := render.Render(baseline(), class("web", v1alpha1.ProfileGeneral, mutate...), render.Options{BudgetLeft: &left,
			Usage: map[string]corev1.ResourceList{"web-spot-arm64": {corev1.ResourceCPU: used}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	room := func(np *karpv1.NodePool) float64 {
		cpu, ok := np.Spec.Limits[corev1.ResourceCPU]
		if !ok {
			t.Fatalf("%s has no cpu limit: %v", np.Name, np.Spec.Limits)
		}
		if np.Name == "web-spot-arm64" {
			cpu.Sub(used)
		}
		return cpu.AsApproximateFloat64()
	}
	const left = 1.25
	res := render1(left)
	if len(res.NodePools) < 4 {
		t.Fatalf("want a ladder of spot and on-demand rungs, got %d", len(res.NodePools))
	}
	for _, np := range res.NodePools {
		var spot bool
		for _, r := range np.Spec.Template.Spec.Requirements {
			spot = spot || r.Key == karpv1.CapacityTypeLabelKey && r.Values[0] == karpv1.CapacityTypeSpot
		}
		matcher, vcpus, dearest := catalog.NewMatcher(np.Spec.Template.Spec.Requirements), room(np), 0.0
		for name, ty := range cat.Types {
			if !matcher.Matches(ty) || ty.VCPU == 0 {
				continue
			}
			price := prices[name].OnDemand
			if spot {
				price = prices[name].SpotAvg
			}
			if price <= 0 {
				continue
			}
			perVCPU := price / float64(ty.VCPU)
			if spend := vcpus * perVCPU; spend > left+1e-9 {
				t.Errorf("%s: %.3f vCPUs of %s cost $%.4f/h, more than the $%.2f/h left", np.Name, vcpus, name, spend, left)
			}
			dearest = max(dearest, perVCPU)
		}
		if dearest == 0 || (vcpus+0.001)*dearest < left {
			t.Errorf("%s: room %.3f vCPUs buys less than the $%.2f/h left at the dearest $%.5f/vCPU", np.Name, vcpus, left, dearest)
		}
		if o := provenanceOf(res, "NodePool/"+np.Name, "spec.limits[cpu]"); !strings.Contains(string(o), "$1.2500/h left of the budget") {
			t.Errorf("%s: spec.limits origin %q", np.Name, o)
		}
	}

	// A class limit below what the money buys wins; nothing left holds each rung at its CPU.
	for _, np := range render1(1000, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40")}
	}).NodePools {
		want := "40"
		if np.Name != "web-spot-arm64" {
			want = "10" // 40 minus the 30 web-spot-arm64 uses
		}
		if cpu := np.Spec.Limits[corev1.ResourceCPU]; cpu.String() != want {
			t.Errorf("%s: cpu limit %s under a class limit of 40, want %s", np.Name, cpu.String(), want)
		}
	}
	for _, np := range render1(0).NodePools {
		want := "0"
		if np.Name == "web-spot-arm64" {
			want = "30"
		}
		if cpu := np.Spec.Limits[corev1.ResourceCPU]; cpu.String() != want {
			t.Errorf("%s: cpu limit %s with no budget left, want %s", np.Name, cpu.String(), want)
		}
	}
}

func TestProfileRequirementsAndExplicitShapes(t *testing.T) {
	req := func(np *karpv1.NodePool, key string) *karpv1.NodeSelectorRequirementWithMinValues {
		for i, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == key {
				return &np.Spec.Template.Spec.Requirements[i]
			}
		}
		return nil
	}
	gpu := mustRender(t, baseline(), class("gpu", v1alpha1.ProfileGPU)).NodePools[0]
	if r := req(gpu, render.LabelInstanceCategory); r == nil || !reflect.DeepEqual(r.Values, []string{"g", "p"}) {
		t.Errorf("GPU categories = %v", r)
	}
	if r := req(gpu, render.LabelGPUManufacturer); r == nil || r.Values[0] != "nvidia" {
		t.Errorf("GPU manufacturer = %v", r)
	}
	// Explicit families replace the profile's categories and generation floor.
	fam := mustRender(t, baseline(), class("m5", v1alpha1.ProfileGeneral, withFamilies(v1alpha1.ConsistencyDiverse, "m5", "m6i"))).NodePools[0]
	if req(fam, render.LabelInstanceCategory) != nil || req(fam, render.LabelInstanceGeneration) != nil {
		t.Errorf("profile shape kept beside explicit families: %v", fam.Spec.Template.Spec.Requirements)
	}
	mem := mustRender(t, baseline(), class("mem", v1alpha1.ProfileMemoryOptimized, func(wc *v1alpha1.WorkloadClass) {
		wc.Spec.Instances = &v1alpha1.InstanceShape{Memory: &v1alpha1.QuantityRange{Min: ptr.To(resource.MustParse("64Gi")), Max: ptr.To(resource.MustParse("512Gi"))}}
	})).NodePools[0]
	var bounds []string
	for _, r := range mem.Spec.Template.Spec.Requirements {
		if r.Key == render.LabelInstanceMemory {
			bounds = append(bounds, string(r.Operator)+" "+r.Values[0])
		}
	}
	if !reflect.DeepEqual(bounds, []string{"Gt 65535", "Lt 524289"}) {
		t.Errorf("memory bounds (MiB) = %v", bounds)
	}
}

// --- Determinism and provenance. ---

func TestRenderIsDeterministic(t *testing.T) {
	out := func() string {
		res := mustRender(t, baseline(), class("web", v1alpha1.ProfileGPU, withNodeClass(func(n *v1alpha1.NodeClassOverrides) {
			n.Tags = v1alpha1.Tags{"a": "1", "b": "2", "c": "3", "d": "4"}
		}), func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Labels = v1alpha1.NodeLabels{"x/a": "1", "x/b": "2", "x/c": "3"}
		}))
		docs, err := res.Objects()
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for _, d := range docs {
			b, _ := yaml.Marshal(d)
			sb.Write(b)
		}
		p, _ := json.Marshal(res.Provenance)
		sb.Write(p)
		return sb.String()
	}
	first := out()
	for i := 0; i < 20; i++ {
		if out() != first {
			t.Fatal("render output differs between runs")
		}
	}
}

func TestProvenanceCoversEveryField(t *testing.T) {
	for _, wc := range []*v1alpha1.WorkloadClass{
		class("gen", v1alpha1.ProfileGeneral), class("ci", v1alpha1.ProfileBurstableCI),
		class("gpu", v1alpha1.ProfileGPU, withFamilies(v1alpha1.ConsistencyFamily, "g6")), class("mem", v1alpha1.ProfileMemoryOptimized),
	} {
		res := mustRender(t, baseline(), wc)
		objects := map[string]bool{}
		for _, f := range res.Provenance {
			objects[f.Object] = true
			if f.Origin == "" || strings.Contains(string(f.Origin), "unknown") {
				t.Errorf("%s %s has no origin", f.Object, f.Path)
			}
		}
		if len(objects) != 1+len(res.NodePools)+len(res.Policies) {
			t.Errorf("%s: provenance covers %d objects, want %d", wc.Name, len(objects), 1+len(res.NodePools)+len(res.Policies))
		}
	}
}

func TestCustomProfileAddsNothingAndExtraRequirementsReachEveryRung(t *testing.T) {
	res := mustRender(t, baseline(), class("raw", v1alpha1.ProfileCustom,
		withArchitectures(v1alpha1.ArchitectureAMD64), withCapacityTypes(v1alpha1.CapacityTypeOnDemand),
		func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-hypervisor", Operator: corev1.NodeSelectorOpIn, Values: []string{"nitro"}}}
		}))
	np := res.NodePools[0]
	var keys []string
	for _, r := range np.Spec.Template.Spec.Requirements {
		keys = append(keys, r.Key)
	}
	if want := []string{"karpenter.sh/capacity-type", "kubernetes.io/arch", "karpenter.k8s.aws/instance-hypervisor"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("requirements = %v, want %v", keys, want)
	}
	if np.Spec.Template.Spec.Taints != nil || np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("Custom added something: %+v", np.Spec)
	}
	renderError(t, baseline(), class("bare", v1alpha1.ProfileCustom), v1alpha1.ReasonInvalidSpec, "spec.profile", "Custom has no defaults")
}
