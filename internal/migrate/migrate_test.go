package migrate_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/migrate"
	"github.com/poolsmith/poolsmith/internal/render"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

func migrateFile(t *testing.T, paths ...string) *migrate.Result {
	t.Helper()
	objs, err := manifest.Load(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return migrate.ToV1(objs, migrate.Options{LegacyDefaults: true})
}

func pool(t *testing.T, res *migrate.Result, name string) *karpv1.NodePool {
	t.Helper()
	for _, np := range res.NodePools {
		if np.Name == name {
			return np
		}
	}
	t.Fatalf("no NodePool %s", name)
	return nil
}

func class(t *testing.T, res *migrate.Result, name string) *awsv1.EC2NodeClass {
	t.Helper()
	for _, nc := range res.NodeClasses {
		if nc.Name == name {
			return nc
		}
	}
	t.Fatalf("no EC2NodeClass %s", name)
	return nil
}

func finding(res *migrate.Result, severity, sourceContains, field string) bool {
	for _, f := range res.Report {
		if f.Severity == severity && strings.Contains(f.Source, sourceContains) && f.Field == field {
			return true
		}
	}
	return false
}

func requirement(np *karpv1.NodePool, key string) *karpv1.NodeSelectorRequirementWithMinValues {
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key {
			return &np.Spec.Template.Spec.Requirements[i]
		}
	}
	return nil
}

func TestProvisionerMappings(t *testing.T) {
	res := migrateFile(t, "testdata/v1alpha5.yaml")
	np := pool(t, res, "default")
	tmpl := np.Spec.Template
	if len(tmpl.Spec.Taints) != 1 || tmpl.Spec.Taints[0] != (corev1.Taint{Key: "example.com/special-taint", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("taints = %v", tmpl.Spec.Taints)
	}
	if len(tmpl.Spec.StartupTaints) != 1 || tmpl.Spec.StartupTaints[0] != (corev1.Taint{Key: "example.com/another-taint", Value: "true", Effect: corev1.TaintEffectNoExecute}) {
		t.Errorf("startupTaints = %v", tmpl.Spec.StartupTaints)
	}
	if tmpl.Labels["team"] != "web" || tmpl.Annotations["example.com/owner"] != "web" || tmpl.Annotations["karpenter.sh/do-not-disrupt"] != "true" || tmpl.Annotations["karpenter.sh/do-not-consolidate"] != "" {
		t.Errorf("metadata = %v %v", tmpl.Labels, tmpl.Annotations)
	}
	if ref := tmpl.Spec.NodeClassRef; ref.Group != "karpenter.k8s.aws" || ref.Kind != "EC2NodeClass" || !strings.HasPrefix(ref.Name, "default") {
		t.Errorf("nodeClassRef = %+v", ref)
	}
	if requirement(np, "karpenter.sh/provisioner-name") != nil || !finding(res, migrate.Warning, "Provisioner default", "spec.requirements[karpenter.sh/provisioner-name]") {
		t.Error("provisioner-name must be dropped and reported")
	}
	if r := requirement(np, "kubernetes.io/arch"); r == nil || r.Values[0] != "amd64" {
		t.Errorf("legacy arch default = %v", r)
	}
	if r := requirement(np, "karpenter.sh/capacity-type"); r == nil || len(r.Values) != 2 {
		t.Errorf("an explicit requirement must not get the legacy default: %v", r)
	}
	if np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty || np.Spec.Disruption.ConsolidateAfter.String() != "30s" {
		t.Errorf("ttlSecondsAfterEmpty: %+v", np.Spec.Disruption)
	}
	if tmpl.Spec.ExpireAfter.String() != "720h0m0s" || !finding(res, migrate.Warning, "Provisioner default", "spec.ttlSecondsUntilExpired") {
		t.Errorf("ttlSecondsUntilExpired: %s", tmpl.Spec.ExpireAfter)
	}
	if cpu := np.Spec.Limits[corev1.ResourceCPU]; cpu.String() != "1k" || *np.Spec.Weight != 10 {
		t.Errorf("limits %v weight %v", np.Spec.Limits, np.Spec.Weight)
	}

	batch := pool(t, res, "batch")
	if batch.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || batch.Spec.Disruption.ConsolidateAfter.String() != "0s" {
		t.Errorf("consolidation.enabled: %+v", batch.Spec.Disruption)
	}
	if batch.Spec.Template.Spec.ExpireAfter.Duration != nil {
		t.Errorf("no ttlSecondsUntilExpired must stay Never, got %s", batch.Spec.Template.Spec.ExpireAfter)
	}
	// default and batch share AWSNodeTemplate default with different kubelet settings.
	if np.Spec.Template.Spec.NodeClassRef.Name != "default-default" || batch.Spec.Template.Spec.NodeClassRef.Name != "default-batch" {
		t.Errorf("kubelet split: %s %s", np.Spec.Template.Spec.NodeClassRef.Name, batch.Spec.Template.Spec.NodeClassRef.Name)
	}
	if k := class(t, res, "default-batch").Spec.Kubelet; string(k["maxPods"].Raw) != "58" || k["containerRuntime"].Raw != nil {
		t.Errorf("batch kubelet = %v", k)
	}

	nc := class(t, res, "default")
	if len(nc.Spec.SecurityGroupSelectorTerms) != 2 || nc.Spec.SecurityGroupSelectorTerms[1].ID != "sg-0fedcba9876543210" {
		t.Errorf("aws-ids: %+v", nc.Spec.SecurityGroupSelectorTerms)
	}
	if nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "prod" || *nc.Spec.InstanceProfile != "KarpenterNodeInstanceProfile-prod" {
		t.Errorf("subnets %+v profile %v", nc.Spec.SubnetSelectorTerms, nc.Spec.InstanceProfile)
	}
	if nc.Spec.AMISelectorTerms[0].Alias != "bottlerocket@latest" || *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 {
		t.Errorf("ami %+v metadata %+v", nc.Spec.AMISelectorTerms, nc.Spec.MetadataOptions)
	}

	gpu := class(t, res, "gpu") // the inline provider
	if len(gpu.Spec.SubnetSelectorTerms) != 2 || gpu.Spec.SubnetSelectorTerms[0].ID != "subnet-0a1b2c3d" {
		t.Errorf("inline provider subnets: %+v", gpu.Spec.SubnetSelectorTerms)
	}
	if len(gpu.Spec.AMISelectorTerms) != 2 || gpu.Spec.AMISelectorTerms[1].Owner != "123456789012" || gpu.Spec.AMISelectorTerms[0].Name != "amazon-eks-gpu-node-1.29-*" || gpu.Spec.AMISelectorTerms[0].Tags["purpose"] != "gpu" || *gpu.Spec.AMIFamily != "AL2" {
		t.Errorf("amiSelector: %+v", gpu.Spec.AMISelectorTerms)
	}
	if r := requirement(pool(t, res, "gpu"), "karpenter.k8s.aws/instance-category"); r != nil {
		t.Errorf("a named family must not get the legacy category default: %v", r)
	}
	if res.Report.HasErrors() {
		t.Errorf("unexpected errors: %v", res.Report)
	}
}

func TestV1beta1Mappings(t *testing.T) {
	res := migrateFile(t, "testdata/v1beta1.yaml")
	np := pool(t, res, "default")
	if np.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized || np.Spec.Disruption.ConsolidateAfter.String() != "0s" {
		t.Errorf("WhenUnderutilized: %+v", np.Spec.Disruption)
	}
	if np.Spec.Template.Spec.ExpireAfter.String() != "720h0m0s" || np.Spec.Disruption.Budgets[0].Nodes != "20%" {
		t.Errorf("expireAfter %s budgets %v", np.Spec.Template.Spec.ExpireAfter, np.Spec.Disruption.Budgets)
	}
	if r := requirement(np, "karpenter.k8s.aws/instance-category"); r == nil || r.MinValues == nil || *r.MinValues != 2 {
		t.Errorf("minValues lost: %v", r)
	}
	nc := class(t, res, "default")
	if nc.Spec.AMISelectorTerms[0].Alias != "al2023@latest" || nc.Spec.AMIFamily != nil || string(nc.Spec.Kubelet["maxPods"].Raw) != "110" || nc.Spec.Role != "KarpenterNodeRole-prod" {
		t.Errorf("node class: %+v", nc.Spec)
	}
	if np.Spec.Template.Annotations["karpenter.sh/do-not-disrupt"] != "true" {
		t.Errorf("do-not-evict: %v", np.Spec.Template.Annotations)
	}
}

func TestWhatHasNoEquivalentIsAnError(t *testing.T) {
	res := migrateFile(t, "testdata/unmigratable.yaml")
	if !finding(res, migrate.Error, "AWSNodeTemplate legacy", "spec.launchTemplate") || !finding(res, migrate.Error, "AWSNodeTemplate ubuntu", "spec.amiFamily") {
		t.Errorf("report = %v", res.Report)
	}
}

// karpenterExamples are the v1 examples shipped with karpenter-provider-aws.
func karpenterExamples(t *testing.T) []string {
	dir := providerDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "examples", "v1", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("%d examples: %v", len(files), err)
	}
	return files
}

func providerDir(t *testing.T) string {
	t.Helper()
	dir, err := testenv.ModuleDir(testenv.KarpenterProviderModule)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func output(t *testing.T, res *migrate.Result) []byte {
	t.Helper()
	var objs []any
	for _, nc := range res.NodeClasses {
		objs = append(objs, nc)
	}
	for _, np := range res.NodePools {
		objs = append(objs, np)
	}
	return documents(t, objs, res.Report)
}

func documents(t *testing.T, objs []any, report migrate.Report) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		doc, err := render.CleanJSON(o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	buf.WriteString("# report\n")
	for _, f := range report {
		buf.WriteString("# " + strings.ReplaceAll(f.String(), "\t", " | ") + "\n")
	}
	// Report sources name files; the module cache's location differs between machines.
	return bytes.ReplaceAll(buf.Bytes(), []byte(providerDir(t)), []byte("$KARPENTER_PROVIDER_AWS"))
}

// TestGoldenAndAcceptedByKarpenter compares each migration with its golden file and
// server-side dry-runs every migrated object against Karpenter's v1 CRDs.
func TestGoldenAndAcceptedByKarpenter(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cases := map[string][]string{"v1alpha5": {"testdata/v1alpha5.yaml"}, "v1beta1": {"testdata/v1beta1.yaml"}, "karpenter-v1-examples": karpenterExamples(t)}
	for name, paths := range cases {
		res := migrateFile(t, paths...)
		ps := migrate.ToPoolsmith(res)
		for _, f := range ps.Report {
			if f.Field == "equivalence" || f.Severity == migrate.Error {
				t.Errorf("%s: %v", name, f)
			}
		}
		checkGolden(t, env, name, output(t, res))
		checkGolden(t, env, name+"-poolsmith", poolsmithOutput(t, ps))
	}
}

// checkGolden compares got with testdata/golden/<name>.yaml (-update rewrites it) and
// server-side dry-runs every object in it.
func checkGolden(t *testing.T, env *testenv.Env, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s differs from the migration (go test ./internal/migrate -update):\n%s", path, got)
	}
	objs, err := manifest.Decode(path, bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := env.Client.Patch(context.Background(), o.Unstructured, client.Apply, client.FieldOwner("migrate-test"), client.ForceOwnership, client.DryRunAll); err != nil {
			t.Errorf("%s: %s %s rejected: %v", name, o.GetKind(), o.GetName(), err)
		}
	}
	if len(objs) == 0 {
		t.Errorf("%s migrated nothing", name)
	}
}

func poolsmithOutput(t *testing.T, ps *migrate.PoolsmithResult) []byte {
	t.Helper()
	res := &migrate.Result{Report: ps.Report}
	var objs []any
	for _, b := range ps.Baselines {
		objs = append(objs, b)
	}
	for _, c := range ps.Classes {
		objs = append(objs, c)
	}
	return documents(t, objs, res.Report)
}

func TestProvisionerBecomesAnEquivalentClassWithItsTaints(t *testing.T) {
	ps := migrate.ToPoolsmith(migrateFile(t, "testdata/v1alpha5.yaml"))
	var wc *v1alpha1.WorkloadClass
	for _, c := range ps.Classes {
		if c.Name == "default" {
			wc = c
		}
	}
	if wc == nil || len(wc.Spec.Taints) != 1 || wc.Spec.Taints[0].Key != "example.com/special-taint" ||
		len(wc.Spec.StartupTaints) != 1 || wc.Spec.StartupTaints[0].Effect != corev1.TaintEffectNoExecute {
		t.Fatalf("class = %+v", wc)
	}
	if len(ps.Baselines) != 2 {
		t.Errorf("the inline provider's identity differs from the template's: want 2 Baselines, got %d", len(ps.Baselines))
	}
}

func TestEquivalenceFindsWhatARenderChanges(t *testing.T) {
	v1 := migrateFile(t, "testdata/v1beta1.yaml")
	ps := migrate.ToPoolsmith(v1)
	wc := ps.Classes[0].DeepCopy()
	wc.Spec.Taints = nil
	wc.Spec.Architectures = wc.Spec.Architectures[:1]
	wc.Spec.NodeClass = &v1alpha1.NodeClassOverrides{Tags: v1alpha1.Tags{"extra": "tag"}}
	res, err := render.Render(ps.Baselines[0], wc, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	diffs := strings.Join(migrate.Equivalence(v1.NodePools[0], v1.NodeClasses[0], res), "\n")
	for _, want := range []string{"capacity types and architectures", "taints [], the NodePool's [example.com/special-taint=:NoSchedule]", "EC2NodeClass default: tags.extra"} {
		if !strings.Contains(diffs, want) {
			t.Errorf("equivalence lacks %q:\n%s", want, diffs)
		}
	}
}

func TestAMISelectorIDsBecomeIDTerms(t *testing.T) {
	objs, err := manifest.Decode("ids.yaml", strings.NewReader(`apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: pinned}
spec:
  instanceProfile: profile
  subnetSelector: {aws-ids: "subnet-1"}
  securityGroupSelector: {aws-ids: "sg-1"}
  amiFamily: AL2023
  amiSelector: {"aws::ids": "ami-0123456789abcdef0, ami-0fedcba9876543210", team: web}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := migrate.ToV1(objs, migrate.Options{})
	terms := class(t, res, "pinned").Spec.AMISelectorTerms
	if len(terms) != 2 || terms[0].ID != "ami-0123456789abcdef0" || terms[1].ID != "ami-0fedcba9876543210" || terms[0].Tags != nil {
		t.Errorf("terms = %+v", terms)
	}
	if !finding(res, migrate.Warning, "pinned", "spec.amiSelector") {
		t.Errorf("the dropped tag filter must be reported: %v", res.Report)
	}
}

// Pools sharing a node class with different kubelet settings each get a copy; long names
// must not truncate into one name, which would keep only the last pool's kubelet.
func TestKubeletCopiesOfLongNamesStayDistinct(t *testing.T) {
	long := strings.Repeat("a", 40)
	doc := func(pool string, maxPods int) string {
		return fmt.Sprintf(`apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: %s}
spec:
  providerRef: {name: %s}
  kubeletConfiguration: {maxPods: %d}
---
`, pool, long, maxPods)
	}
	objs, err := manifest.Decode("long.yaml", strings.NewReader(doc(long+"-pool-one", 10)+doc(long+"-pool-two", 20)+`apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: `+long+`}
spec:
  amiFamily: AL2023
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	res := migrate.ToV1(objs, migrate.Options{})
	for name, maxPods := range map[string]string{long + "-pool-one": "10", long + "-pool-two": "20"} {
		ref := pool(t, res, name).Spec.Template.Spec.NodeClassRef.Name
		if len(ref) > 63 {
			t.Errorf("%s: node class name %q is longer than 63", name, ref)
		}
		if got := string(class(t, res, ref).Spec.Kubelet["maxPods"].Raw); got != maxPods {
			t.Errorf("%s: its node class %s has maxPods %s, want %s", name, ref, got, maxPods)
		}
	}
}

// TestMigrateRefusesWhatV1CannotHoldInsteadOfPanicking: TTLs and durations v1 cannot hold,
// weights v1 refuses and unknown versions are errors naming the object and the field,
// never a panic, a refused object or a silent drop.
func TestMigrateRefusesWhatV1CannotHoldInsteadOfPanicking(t *testing.T) {
	const provisioner = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\nspec:\n  providerRef: {name: default}\n"
	const v1beta1 = "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: beta}\nspec:\n  template: {spec: {nodeClassRef: {name: default}}}\n"
	const v1 = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: now}\nspec:\n  template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}}\n"
	for _, tc := range []struct {
		name, yaml, source, field string
	}{
		{"huge ttlSecondsUntilExpired", provisioner + "  ttlSecondsUntilExpired: 99999999999999\n", "Provisioner old", "spec.ttlSecondsUntilExpired"},
		{"huge ttlSecondsAfterEmpty", provisioner + "  ttlSecondsAfterEmpty: 99999999999999\n", "Provisioner old", "spec.ttlSecondsAfterEmpty"},
		{"negative ttlSecondsUntilExpired", provisioner + "  ttlSecondsUntilExpired: -5\n", "Provisioner old", "spec.ttlSecondsUntilExpired"},
		{"negative ttlSecondsAfterEmpty", provisioner + "  ttlSecondsAfterEmpty: -30\n", "Provisioner old", "spec.ttlSecondsAfterEmpty"},
		{"weight above 100", provisioner + "  weight: 1000\n", "Provisioner old", "spec.weight"},
		{"v1beta1 prose expireAfter", v1beta1 + "  disruption: {expireAfter: 3 weeks}\n", "NodePool beta", "spec.disruption.expireAfter"},
		{"v1beta1 negative consolidateAfter", v1beta1 + "  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: -1m}\n", "NodePool beta", "spec.disruption.consolidateAfter"},
		{"v1beta1 weight 0", v1beta1 + "  weight: 0\n", "NodePool beta", "spec.weight"},
		{"v1 weight 1000", v1 + "  weight: 1000\n", "NodePool now", "spec.weight"},
		{"v1 negative expireAfter", strings.Replace(v1, "requirements: []", "requirements: [], expireAfter: -5s", 1), "NodePool now", "spec.template.spec.expireAfter"},
		{"karpenter.sh/v2 NodePool", strings.Replace(v1, "karpenter.sh/v1", "karpenter.sh/v2", 1), "NodePool now", "apiVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifest.Decode("in.yaml", strings.NewReader(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			res := migrate.ToV1(objs, migrate.Options{LegacyDefaults: true})
			if !res.Report.HasErrors() || !finding(res, migrate.Error, tc.source, tc.field) {
				t.Errorf("want an error on %s %s, got %v", tc.source, tc.field, res.Report)
			}
		})
	}
}
