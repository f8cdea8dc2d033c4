package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/poolsmith/poolsmith/internal/manifest"
)

const samples = "../../config/samples"

func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRenderSamples(t *testing.T) {
	code, out, stderr := run(t, "", "render", "-f", samples)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	objs, err := manifest.Decode("stdout", strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	// 4 EC2NodeClasses, then 16 NodePools, then each class's AccessRule, each group
	// sorted by name.
	if len(objs) != 24 {
		t.Fatalf("got %d objects, want 24", len(objs))
	}
	for i, o := range objs {
		wantKind := "NodePool"
		switch {
		case i < 4:
			wantKind = "EC2NodeClass"
		case i >= 20:
			wantKind = "AccessRule"
		}
		if o.GetKind() != wantKind {
			t.Errorf("object %d is %s, want %s", i, o.GetKind(), wantKind)
		}
		if i > 0 && objs[i-1].GetKind() == o.GetKind() && objs[i-1].GetName() >= o.GetName() {
			t.Errorf("%s after %s: not sorted", o.GetName(), objs[i-1].GetName())
		}
		if o.GetLabels()["app.kubernetes.io/managed-by"] != "poolsmith" {
			t.Errorf("%s lacks the managed-by label", o.GetName())
		}
	}
}

func TestRenderFromStdinAndAsJSON(t *testing.T) {
	_, yamlOut, _ := run(t, "", "render", "-f", samples)
	in := strings.Join([]string{mustRead(t, samples+"/poolsmith_v1alpha1_baseline.yaml"), mustRead(t, samples+"/poolsmith_v1alpha1_workloadclass_ci.yaml")}, "\n---\n")
	code, out, stderr := run(t, in, "render", "-f", "-", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Kind != "List" || len(list.Items) != 6 {
		t.Fatalf("want a List of 6 items, got %v (%v)", len(list.Items), err)
	}
	if !strings.Contains(yamlOut, "name: ci-spot-amd64") {
		t.Error("the directory render lacks ci-spot-amd64")
	}
}

func TestInvalidInputExitsOneWithNothingOnStdout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  []string
	}{
		{"contradicting tag", "", []string{"render", "-f", "testdata/bad-tag.yaml"},
			[]string{"testdata/bad-tag.yaml", "WorkloadClass rogue", "spec.nodeClass.tags[cost-center]", "BaselineConflict"}},
		{"unknown field", "apiVersion: poolsmith.dev/v1alpha1\nkind: WorkloadClass\nmetadata: {name: typo}\nspec: {profiel: GPU}\n", []string{"render", "-f", "-"},
			[]string{"- (document 1, WorkloadClass typo)", `unknown field "spec.profiel"`}},
		{"missing Baseline", "apiVersion: poolsmith.dev/v1alpha1\nkind: WorkloadClass\nmetadata: {name: lonely}\nspec: {baselineRef: {name: prod}}\n", []string{"explain", "-f", "-"},
			[]string{"WorkloadClass lonely", "spec.baselineRef", `Baseline "prod" is not in the input`}},
		{"missing file", "", []string{"render", "-f", "testdata/nope.yaml"}, []string{"testdata/nope.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.stdin, tc.args...)
			if code != ExitFindings || out != "" {
				t.Fatalf("exit %d with stdout %q, want exit 1 and nothing", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"render"},
		{"render", "-f", samples, "-o", "xml"},
		{"render", "--no-such-flag"},
		{"lint", "-f", samples, "extra-arg"},
		{"no-such-command"},
	} {
		if code, _, stderr := run(t, "", args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
}

func TestUsageErrorsPrintTheHelpHint(t *testing.T) {
	for _, args := range [][]string{{"render", "-f", samples, "extra-arg"}, {"no-such-command"}, {"signals", "publish"}} {
		if code, _, stderr := run(t, "", args...); code != ExitUsage || !strings.Contains(stderr, "Run 'poolsmith --help'") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestRuntimeFailuresExitThreeWithoutUsageHint(t *testing.T) {
	// An API server nobody listens on: the command was right, the world was not.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	unreachable := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(unreachable), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"diff", "-f", samples, "--kubeconfig", kubeconfig},
		{"signals", "publish", "--feed", "../signals/testdata/spot-advisor-data.json", "--kubeconfig", kubeconfig},
		{"migrate", "-f", "../migrate/testdata/v1beta1.yaml", "--report", filepath.Join(t.TempDir(), "no-such-dir", "report.txt")},
	} {
		code, _, stderr := run(t, "", args...)
		if code != ExitRuntime || strings.Contains(stderr, "--help") || stderr == "" {
			t.Errorf("%v: exit %d, want 3 without a usage hint: %q", args[0], code, stderr)
		}
	}
}

func TestEveryCommandHelpListsTheExitCodes(t *testing.T) {
	for _, cmd := range [][]string{{"render"}, {"explain"}, {"lint"}, {"diff"}, {"simulate"}, {"migrate"}, {"catalog"}, {"manager"}, {"signals", "publish"}} {
		code, out, _ := run(t, "", append(cmd, "--help")...)
		if code != ExitOK || !strings.Contains(out, "2 usage") || !strings.Contains(out, "3 runtime failure") {
			t.Errorf("%v --help: exit %d, lacks the exit codes", cmd, code)
		}
	}
}

func TestDuplicateGeneratedNamesAcrossClassesFailRenderExplainLint(t *testing.T) {
	for _, cmd := range []string{"render", "explain", "lint"} {
		code, out, stderr := run(t, "", cmd, "-f", "testdata/shared-rung-name.yaml")
		all := out + stderr
		if code != ExitFindings || !strings.Contains(all, "NodePool/web-spot-arm64-spot-arm64") || !strings.Contains(all, "name-collision") {
			t.Errorf("%s: exit %d, want 1 naming the NodePool:\n%s", cmd, code, all)
		}
		if cmd != "lint" && out != "" {
			t.Errorf("%s printed objects for an input it refuses", cmd)
		}
	}
}

func TestReservedPoolsmithLabelOnAClassIsRefused(t *testing.T) {
	for _, cmd := range []string{"render", "explain", "lint"} {
		code, out, stderr := run(t, "", cmd, "-f", "testdata/reserved-label.yaml")
		// Validation against the CRD or the renderer: either names the field and the rule.
		all := out + stderr
		if code != ExitFindings || !strings.Contains(all, "spec.labels") || !strings.Contains(all, "poolsmith.dev label domain is reserved") {
			t.Errorf("%s: exit %d\n%s%s", cmd, code, out, stderr)
		}
	}
}

func TestEmptyInputSaysSoAndExitsOne(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"render", "explain", "lint"} {
		for _, args := range [][]string{{cmd, "-f", dir}, {cmd, "-f", "-"}} {
			code, out, stderr := run(t, "", args...)
			if code != ExitFindings || out != "" || !strings.Contains(stderr, "no Baseline or WorkloadClass found in the input") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
			}
		}
	}
	code, _, stderr := run(t, "", "render", "-f", samples+"/poolsmith_v1alpha1_baseline.yaml")
	if code != ExitFindings || !strings.Contains(stderr, "no WorkloadClass found in the input, only Baselines") {
		t.Errorf("Baseline only: exit %d, %q", code, stderr)
	}
}

func TestTooManyClassesAreRefused(t *testing.T) {
	var in strings.Builder
	in.WriteString(mustRead(t, samples+"/poolsmith_v1alpha1_baseline.yaml"))
	for i := range MaxClasses + 1 {
		fmt.Fprintf(&in, "\n---\n{\"apiVersion\": \"poolsmith.dev/v1alpha1\", \"kind\": \"WorkloadClass\", \"metadata\": {\"name\": \"c%d\"}}", i)
	}
	code, out, stderr := run(t, in.String(), "render", "-f", "-")
	if code != ExitFindings || out != "" || !strings.Contains(stderr, "the input has 5001 WorkloadClasses; at most 5000") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestSpecialFilesAreRefusedNotRead(t *testing.T) {
	for _, args := range [][]string{
		{"render", "-f", "/dev/zero"},
		{"render", "-f", samples, "--signals", "/dev/zero"},
		{"signals", "publish", "--feed", "/dev/zero", "--dry-run"},
	} {
		code, _, stderr := run(t, "", args...)
		if code != ExitFindings || !strings.Contains(stderr, "/dev/zero is not a regular file") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

func TestBadDurationsNameTheFieldWithAHint(t *testing.T) {
	base := mustRead(t, samples+"/poolsmith_v1alpha1_baseline.yaml")
	for _, tc := range []struct{ spec, field, value string }{
		{"expireAfter: 1d", "spec.expireAfter", `"1d"`},
		{"disruption: {consolidateAfter: forever}", "spec.disruption.consolidateAfter", `"forever"`},
		{"terminationGracePeriod: 2days", "spec.terminationGracePeriod", `"2days"`},
		{"disruption: {budgets: [{nodes: '1', schedule: '@daily', duration: 1w}]}", "spec.disruption.budgets[0].duration", `"1w"`},
	} {
		in := base + "\n---\napiVersion: poolsmith.dev/v1alpha1\nkind: WorkloadClass\nmetadata: {name: web}\nspec:\n  " + tc.spec + "\n"
		code, _, stderr := run(t, in, "render", "-f", "-")
		// The field and the value, and what to write (the renderer's hint, or the CRD's
		// pattern when the input is validated against the CRD first); not only Go's parser.
		named := strings.Contains(stderr, "WorkloadClass web): "+tc.field+": ")
		hint := strings.Contains(stderr, "720h") || strings.Contains(stderr, "should match")
		if code != ExitFindings || !named || !strings.Contains(stderr, tc.value) || !hint || strings.Contains(stderr, "time: ") {
			t.Errorf("%s: exit %d, %q", tc.spec, code, stderr)
		}
	}
}

func TestLongClassNameBlamesMetadataName(t *testing.T) {
	in := mustRead(t, samples+"/poolsmith_v1alpha1_baseline.yaml") + "\n---\napiVersion: poolsmith.dev/v1alpha1\nkind: WorkloadClass\nmetadata: {name: " + strings.Repeat("a", 64) + "}\n"
	code, _, stderr := run(t, in, "render", "-f", "-")
	if code != ExitFindings || !strings.Contains(stderr, "metadata.name") || strings.Contains(stderr, "spec.labels") {
		t.Errorf("exit %d, %q", code, stderr)
	}
}

func TestSimulateRefusesBadZonesAndNamesBadReplicas(t *testing.T) {
	for _, zones := range []string{",,,", "us-east-1a,,us-east-1b", "US_EAST"} {
		if code, _, stderr := run(t, "", "simulate", "-f", samples, "-f", samples+"/workloads", "--zones", zones); code != ExitUsage || !strings.Contains(stderr, "--zones") {
			t.Errorf("--zones %q: exit %d, %q", zones, code, stderr)
		}
	}
	in := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -5, template: {spec: {containers: [{name: c}]}}}\n"
	code, _, stderr := run(t, in, "simulate", "-f", samples, "-f", "-")
	if code != ExitFindings || !strings.Contains(stderr, "spec.replicas: -5 must not be negative") || strings.Contains(stderr, "no workload") {
		t.Errorf("replicas -5: exit %d, %q", code, stderr)
	}
}

func TestOtherKindsAreIgnoredWithAWarning(t *testing.T) {
	code, _, stderr := run(t, "", "render", "-f", "testdata/lint-problems.yaml")
	if code != ExitOK || !strings.Contains(stderr, "warning: testdata/lint-problems.yaml (document 5, ConfigMap not-ours)") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestExplainShowsValuesAndOrigins(t *testing.T) {
	code, out, stderr := run(t, "", "explain", "-f", samples, "--object", "NodePool/gpu-spot-amd64-g5")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range [][]string{
		{"spec.template.spec.requirements[karpenter.k8s.aws/instance-family]", "In [g5]", "class"},
		{"spec.disruption.consolidationPolicy", "WhenEmpty", "profile:GPU"},
		{"spec.template.metadata.labels[example.com/environment]", "prod", "baseline"},
		{"spec.weight", "97", "computed:weight(Static, rung 4 of 4 in preference order)"},
	} {
		if !hasLine(out, want...) {
			t.Errorf("explain output has no line with %q", want)
		}
	}
	if strings.Contains(out, "EC2NodeClass/") || strings.Contains(out, "gpu-on-demand") {
		t.Error("--object did not filter")
	}
	code, out, _ = run(t, "", "explain", "-f", samples, "--object", "gpu", "-o", "json")
	var fields []map[string]string
	if code != ExitOK || json.Unmarshal([]byte(out), &fields) != nil || len(fields) == 0 {
		t.Fatalf("explain -o json: exit %d, %d fields", code, len(fields))
	}
	for _, f := range fields {
		// The class's resolved spec.rebalance and limits are listed after its objects' fields.
		rebalance := f["object"] == "WorkloadClass/gpu" && (strings.HasPrefix(f["path"], "spec.rebalance.") || strings.HasPrefix(f["path"], "spec.limits["))
		if (f["object"] != "EC2NodeClass/gpu" && f["object"] != "AccessRule/gpu" && !rebalance) || f["origin"] == "" {
			t.Errorf("unexpected field %v", f)
		}
	}
	if code, _, _ := run(t, "", "explain", "-f", samples, "--object", "NodePool/nope"); code != ExitFindings {
		t.Errorf("unknown --object: exit %d, want 1", code)
	}
}

func TestExplainShowsTheResolvedRebalanceSettings(t *testing.T) {
	code, out, stderr := run(t, "", "explain", "-f", "testdata/rebalance.yaml")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, section, ok := strings.Cut(out, "\nREBALANCE ")
	if !ok {
		t.Fatalf("no rebalance section:\n%s", out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(section, "\n")[2:] {
		if f := strings.Fields(line); len(f) == 4 {
			rows[f[1]] = f
		}
	}
	// The Baseline sets policy, maxInterruption and after; the class after and
	// maxConcurrent; nobody quietPeriod.
	for _, want := range [][]string{
		{"WorkloadClass/web", "spec.rebalance.policy", "Preferred", "baseline"},
		{"WorkloadClass/web", "spec.rebalance.maxInterruption", "<5%", "baseline"},
		{"WorkloadClass/web", "spec.rebalance.after", "10m0s", "class"},
		{"WorkloadClass/web", "spec.rebalance.maxConcurrent", "25%", "class"},
		{"WorkloadClass/web", "spec.rebalance.quietPeriod", "1h0m0s", "poolsmith-default"},
	} {
		if got := rows[want[1]]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %q, want %q", want[1], got, want)
		}
	}
	if len(rows) != 5 {
		t.Errorf("want 5 settings, got %v", rows)
	}

	// --object selects the class's section alone; -o json lists the same settings.
	code, out, _ = run(t, "", "explain", "-f", "testdata/rebalance.yaml", "--object", "WorkloadClass/web", "-o", "json")
	var fields []map[string]string
	if code != ExitOK || json.Unmarshal([]byte(out), &fields) != nil || len(fields) != 5 {
		t.Fatalf("explain --object WorkloadClass/web -o json: exit %d, %d fields: %s", code, len(fields), out)
	}
	if f := fields[0]; f["object"] != "WorkloadClass/web" || f["path"] != "spec.rebalance.policy" || f["value"] != "Preferred" || f["origin"] != "baseline" {
		t.Errorf("first setting: %v", f)
	}
}

func TestLintSamplesHaveNoErrors(t *testing.T) {
	code, out, stderr := run(t, "", "lint", "-f", samples)
	if code != ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	if !strings.Contains(out, "toleration-needed") || !strings.Contains(stderr, "4 classes, 0 errors") {
		t.Errorf("out %q stderr %q", out, stderr)
	}
}

func TestLintFindsProblems(t *testing.T) {
	code, out, _ := run(t, "", "lint", "-f", "testdata/lint-problems.yaml", "-o", "json")
	if code != ExitFindings {
		t.Fatalf("exit %d, want 1", code)
	}
	var findings []struct{ Severity, Object, Check, Message string }
	if err := json.Unmarshal([]byte(out), &findings); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"warning WorkloadClass/api class-overlap":                false,
		"error NodePool/odd-spot-arm64-m7g selects-nothing":      false,
		"warning WorkloadClass/odd toleration-needed":            false,
		"warning WorkloadClass/odd slice-not-for-architecture":   false,
		"error NodePool/odd-on-demand-arm64-m7g selects-nothing": false,
	}
	for _, f := range findings {
		want[f.Severity+" "+f.Object+" "+f.Check] = true
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no finding %q in %s", k, out)
		}
	}
	for _, f := range findings {
		if f.Object == "NodePool/odd-spot-arm64-c7g" {
			t.Errorf("c7g fits its rung, got %v", f)
		}
	}

	code, out, _ = run(t, "", "lint", "-f", "testdata/bad-tag.yaml")
	if code != ExitFindings || !strings.Contains(out, "baseline-conflict") {
		t.Errorf("baseline conflict: exit %d, %s", code, out)
	}
}

// hasLine says whether one line of out holds every part.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	objs, err := manifest.Load([]string{path}, nil)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %v", path, err)
	}
	return string(objs[0].Raw)
}

func TestCatalogCommand(t *testing.T) {
	code, out, stderr := run(t, "", "catalog", "-f", samples, "--class", "gpu", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		Rung, Name, GPUManufacturer string
		HourlyPrice                 float64
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("%v: %d rows", err, len(rows))
	}
	for _, r := range rows {
		if r.GPUManufacturer != "nvidia" || !strings.HasPrefix(r.Rung, "gpu-") || r.HourlyPrice <= 0 {
			t.Errorf("unexpected row %+v", r)
		}
		if fam := strings.SplitN(r.Name, ".", 2)[0]; !strings.HasSuffix(r.Rung, "-"+fam) {
			t.Errorf("%s listed under rung %s", r.Name, r.Rung)
		}
	}
	if code, out, _ := run(t, "", "catalog", "--missing-facts"); code != ExitOK || !hasLine(out, "c8i.large") {
		t.Errorf("--missing-facts: exit %d, lacks c8i.large", code)
	}
	if code, out, _ := run(t, "", "catalog", "--region", "eu-west-1"); code != ExitOK || !hasLine(out, "m7g.xlarge", "arm64", "16.0Gi") {
		t.Errorf("catalog --region eu-west-1: exit %d", code)
	}
	if code, _, stderr := run(t, "", "catalog", "--region", "mars-1"); code != ExitUsage || !strings.Contains(stderr, "us-east-1") {
		t.Errorf("unknown region: exit %d, %s", code, stderr)
	}
	if code, _, _ := run(t, "", "catalog", "-f", samples, "--class", "nope"); code != ExitFindings {
		t.Errorf("unknown class: exit %d", code)
	}
}

func TestSimulate(t *testing.T) {
	code, out, stderr := run(t, "", "simulate", "-f", samples, "-f", samples+"/workloads", "-o", "json",
		"--compare-nodepools", samples+"/compare/karpenter-general-purpose.yaml")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Poolsmith, Compared struct {
			NodeClaims []struct {
				NodePool, InstanceType, CapacityType string
				Pods                                 []string
			}
			Unschedulable map[string]string
			Totals        struct{ Nodes, InstanceTypes, Families int }
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Poolsmith.Unschedulable) != 0 || res.Poolsmith.Totals.Nodes == 0 {
		t.Fatalf("poolsmith: %+v", res.Poolsmith)
	}
	placed := map[string]string{}
	for _, nc := range res.Poolsmith.NodeClaims {
		for _, p := range nc.Pods {
			placed[p] = nc.NodePool
		}
	}
	for pod, prefix := range map[string]string{"ml/train-0": "gpu-", "ci/runner-0": "ci-", "shop/web-0": "general-", "default/inflate-0": "general-"} {
		if !strings.HasPrefix(placed[pod], prefix) {
			t.Errorf("%s on %q, want a %s rung", pod, placed[pod], prefix)
		}
	}
	// The hand-written pool has no GPU types and no ci label: those pods cannot land.
	if len(res.Compared.Unschedulable) != 10 {
		t.Errorf("compared: %d unschedulable, want 10", len(res.Compared.Unschedulable))
	}
	code, out, _ = run(t, "", "simulate", "-f", samples, "-f", samples+"/workloads/web-spread.yaml")
	if code != ExitOK || !hasLine(out, "families", "1") || !hasLine(out, "general-spot-arm64", "us-east-1b") {
		t.Errorf("table output: exit %d\n%s", code, out)
	}
	if code, _, stderr := run(t, "", "simulate", "-f", samples); code != ExitFindings || !strings.Contains(stderr, "no workload") {
		t.Errorf("no workload: exit %d %s", code, stderr)
	}
}

func TestMigrate(t *testing.T) {
	code, out, stderr := run(t, "", "migrate", "-f", "../migrate/testdata/v1alpha5.yaml", "--to", "v1")
	if code != ExitOK || !strings.Contains(out, "kind: NodePool") || !strings.Contains(stderr, "karpenter.sh/provisioner-name") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if code, _, _ := run(t, "", "migrate", "-f", "../migrate/testdata/v1alpha5.yaml", "--check"); code != ExitFindings {
		t.Errorf("--check with warnings: exit %d, want 1", code)
	}
	code, out, stderr = run(t, "", "migrate", "-f", "../migrate/testdata/unmigratable.yaml", "--report-format", "json")
	var report []map[string]string
	if code != ExitFindings || out != "" || json.Unmarshal([]byte(stderr), &report) != nil || len(report) == 0 {
		t.Errorf("errors: exit %d, stdout %q, report %s", code, out, stderr)
	}
	code, out, stderr = run(t, "", "migrate", "-f", "../migrate/testdata/v1beta1.yaml", "--check")
	objs, err := manifest.Decode("stdout", strings.NewReader(out))
	if err != nil || len(objs) != 2 || objs[0].GetKind() != "Baseline" || objs[1].GetKind() != "WorkloadClass" {
		t.Fatalf("--to poolsmith: %v %d objects\n%s", err, len(objs), out)
	}
	if code != ExitFindings || !strings.Contains(stderr, "becomes WorkloadClass") {
		t.Errorf("v1beta1 has warnings, so --check exits 1: exit %d\n%s", code, stderr)
	}
	if code, _, _ := run(t, "", "migrate", "-f", "../migrate/testdata/v1beta1.yaml", "--to", "v2"); code != ExitUsage {
		t.Errorf("--to v2: exit %d, want 2", code)
	}
}

func TestLintReadsNamespacesForDefaultClasses(t *testing.T) {
	in := mustRead(t, samples+"/poolsmith_v1alpha1_baseline.yaml") + "\n---\n" + `apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: gpu}
spec:
  profile: GPU
  taints: [{key: example.com/dedicated, value: gpu, effect: NoSchedule}]
  access: {namespaces: [ml]}
---
apiVersion: v1
kind: Namespace
metadata: {name: sandbox, labels: {poolsmith.dev/default-class: gpu}}
`
	code, out, stderr := run(t, in, "lint", "-f", "-")
	if code != ExitFindings || !strings.Contains(out, "Namespace/sandbox") || !strings.Contains(out, "default-excluded") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(stderr, "ignoring") {
		t.Errorf("the Namespace was ignored: %s", stderr)
	}
}

func TestRenderExplainHeadroomOnlyWithHeadroomPods(t *testing.T) {
	files := []string{"-f", samples + "/poolsmith_v1alpha1_baseline.yaml", "-f", "testdata/headroom.yaml"}
	deployments := func(out string) []string {
		objs, err := manifest.Decode("stdout", strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, o := range objs {
			if o.GetKind() == "Deployment" {
				if i != len(objs)-1 {
					t.Errorf("the Deployment is not printed last")
				}
				replicas, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
				got = append(got, fmt.Sprintf("%s/%s replicas %v", o.GetNamespace(), o.GetName(), replicas))
			}
		}
		return got
	}
	// As the manager: off by default.
	code, out, stderr := run(t, "", append([]string{"render"}, files...)...)
	if code != ExitOK || len(deployments(out)) != 0 {
		t.Fatalf("render without --headroom: exit %d, deployments %v: %s", code, deployments(out), stderr)
	}
	code, out, stderr = run(t, "", append([]string{"render", "--headroom=pods", "--headroom-namespace", "warm-hr"}, files...)...)
	if got := deployments(out); code != ExitOK || len(got) != 1 || got[0] != "warm-hr/warm-headroom replicas 2" {
		t.Fatalf("render --headroom=pods: exit %d, deployments %v: %s", code, got, stderr)
	}
	code, out, stderr = run(t, "", append([]string{"explain", "--headroom=pods", "--object", "Deployment/poolsmith-headroom/warm-headroom"}, files...)...)
	if code != ExitOK {
		t.Fatalf("explain: exit %d: %s", code, stderr)
	}
	for _, want := range [][]string{
		{"Deployment/poolsmith-headroom/warm-headroom", "spec.replicas", "2"},
		{"spec.template.spec.nodeSelector.karpenter.sh/nodepool", "warm-on-demand-amd64", "computed:headroom rung warm-on-demand-amd64"},
	} {
		if !hasLine(out, want...) {
			t.Errorf("explain output has no line with %q:\n%s", want, out)
		}
	}
	// The CapacityBuffer mechanism: its PodTemplate and CapacityBuffer, last, the buffer
	// after the template it refers to.
	code, out, stderr = run(t, "", append([]string{"render", "--headroom=capacitybuffer"}, files...)...)
	if code != ExitOK {
		t.Fatalf("render --headroom=capacitybuffer: exit %d: %s", code, stderr)
	}
	objs, err := manifest.Decode("stdout", strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(objs); n < 2 || objs[n-2].GetKind() != "PodTemplate" || objs[n-1].GetKind() != "CapacityBuffer" || deployments(out) != nil {
		t.Fatalf("render --headroom=capacitybuffer printed:\n%s", out)
	}
	if replicas, _, _ := unstructured.NestedFieldNoCopy(objs[len(objs)-1].Object, "spec", "replicas"); fmt.Sprint(replicas) != "2" {
		t.Errorf("the CapacityBuffer holds %v units, want 2", replicas)
	}
	for _, cmd := range []string{"render", "explain", "simulate", "diff"} {
		code, _, stderr = run(t, "", append([]string{cmd, "--headroom=auto"}, files...)...)
		if code != ExitUsage || !strings.Contains(stderr, `--headroom auto: only the manager decides it`) {
			t.Errorf("%s --headroom=auto: exit %d: %s", cmd, code, stderr)
		}
		code, _, stderr = run(t, "", append([]string{cmd, "--headroom=buffer"}, files...)...)
		if code != ExitUsage || !strings.Contains(stderr, `--headroom "buffer": must be capacitybuffer, pods or off`) {
			t.Errorf("%s --headroom=buffer: exit %d: %s", cmd, code, stderr)
		}
	}
}

func TestSimulateAddsHeadroomUnitsUnlessNoHeadroom(t *testing.T) {
	args := []string{"simulate", "-o", "json", "-f", samples + "/poolsmith_v1alpha1_baseline.yaml", "-f", "testdata/headroom.yaml", "-f", samples + "/workloads/web-spread.yaml", "-f", samples + "/poolsmith_v1alpha1_workloadclass_general.yaml"}
	placed := func(extra ...string) map[string]string {
		code, out, stderr := run(t, "", append(args, extra...)...)
		if code != ExitOK {
			t.Fatalf("simulate %v: exit %d: %s", extra, code, stderr)
		}
		var res struct {
			Poolsmith struct {
				NodeClaims []struct {
					NodePool string
					Pods     []string
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		on := map[string]string{}
		for _, nc := range res.Poolsmith.NodeClaims {
			for _, p := range nc.Pods {
				on[p] = nc.NodePool
			}
		}
		return on
	}
	for _, mode := range []string{"--headroom=pods", "--headroom=capacitybuffer"} {
		on := placed(mode, "--headroom-namespace", "warm-hr")
		for _, unit := range []string{"warm-hr/warm-headroom-0", "warm-hr/warm-headroom-1"} {
			if on[unit] != "warm-on-demand-amd64" {
				t.Errorf("%s: %s on %q, want warm-on-demand-amd64 (placed: %v)", mode, unit, on[unit], on)
			}
		}
	}
	for _, extra := range [][]string{nil, {"--headroom=pods", "--no-headroom"}} {
		for pod := range placed(extra...) {
			if strings.Contains(pod, "headroom") {
				t.Errorf("simulate %v placed %s", extra, pod)
			}
		}
	}
}

// simulate --at reads the headroom's schedule at that time: inside the window the units
// are pending pods, outside it there are none.
func TestSimulateAtReadsTheScheduleThen(t *testing.T) {
	class := filepath.Join(t.TempDir(), "office.yaml")
	if err := os.WriteFile(class, []byte(`apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: office}
spec:
  baselineRef: {name: default}
  architectures: [amd64]
  capacityTypes: [on-demand]
  headroom:
    replicas: 2
    podShape: {cpu: "1", memory: 2Gi}
    schedule: [{start: "0 8 * * 1-5", duration: 10h, timeZone: Europe/Paris}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"simulate", "--headroom=pods", "-o", "json", "-f", samples + "/poolsmith_v1alpha1_baseline.yaml", "-f", class, "-f", samples + "/workloads/web-spread.yaml", "-f", samples + "/poolsmith_v1alpha1_workloadclass_general.yaml"}
	units := func(at string) int {
		code, out, stderr := run(t, "", append(args, "--at", at)...)
		if code != ExitOK {
			t.Fatalf("simulate --at %s: exit %d: %s", at, code, stderr)
		}
		return strings.Count(out, "office-headroom-")
	}
	// Wednesday 2 December 2026: 09:00 UTC is 10:00 in Paris, 20:00 UTC is 21:00.
	if n := units("2026-12-02T09:00:00Z"); n != 2 {
		t.Errorf("inside the window: %d units placed, want 2", n)
	}
	if n := units("2026-12-02T20:00:00Z"); n != 0 {
		t.Errorf("outside the window: %d units placed, want 0", n)
	}
	code, _, stderr := run(t, "", append(args, "--at", "tomorrow")...)
	if code != ExitUsage || !strings.Contains(stderr, `--at "tomorrow": must be an RFC 3339 time`) {
		t.Errorf("--at tomorrow: exit %d: %s", code, stderr)
	}
}

// simulate sizes a percentage from what the workload's own pods request on the class: a
// first run without the headroom places them, then the units follow.
func TestSimulateSizesAPercentageFromTheWorkload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pct.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: pct}
spec:
  baselineRef: {name: default}
  architectures: [amd64]
  capacityTypes: [on-demand]
  headroom:
    percentage: 50
    podShape: {cpu: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: team}
spec:
  replicas: 6
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      nodeSelector: {poolsmith.dev/class: pct}
      containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"simulate", "--headroom=pods", "-o", "json", "-f", samples + "/poolsmith_v1alpha1_baseline.yaml", "-f", file}
	code, out, stderr := run(t, "", args...)
	if code != ExitOK {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	// 50 % of 6 CPU in units of 1 CPU.
	if n := strings.Count(out, `"poolsmith-headroom/pct-headroom-`); n != 3 {
		t.Errorf("%d units placed, want 3:\n%s", n, out)
	}
	code, out, stderr = run(t, "", append(args, "--no-headroom")...)
	if code != ExitOK || strings.Contains(out, "pct-headroom-") {
		t.Errorf("--no-headroom: exit %d, units placed: %s%s", code, stderr, out)
	}
}
