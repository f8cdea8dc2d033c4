package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// idAndShare is testdata/commitments.yaml with its plan naming only id and share.
func idAndShare(t *testing.T) string {
	t.Helper()
	full, err := os.ReadFile("testdata/commitments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	declared := `    - id: sp-0a1b2c3d
      type: EC2Instance
      commitment: "3.00"
      family: m7g
      region: us-east-1
      discount: {families: [{family: m7g, discount: "31%"}]}
      share: {percent: 40}
`
	if !strings.Contains(string(full), declared) {
		t.Fatal("testdata/commitments.yaml no longer declares the plan this test replaces")
	}
	return writeTemp(t, "id-and-share.yaml", strings.Replace(string(full), declared, "    - {id: sp-0a1b2c3d, share: {percent: 40}}\n", 1))
}

// signalsCommitments is the signals ConfigMap `signals commitments --dry-run` prints for the
// AWS CLI's outputs of the worked example's plan. Their terms end in 2027: the test moves
// them to 2099 so that it does not expire with them.
func signalsCommitments(t *testing.T) string {
	t.Helper()
	code, out, stderr := run(t, "", "signals", "commitments", "--savings-plans", "../signals/testdata/commitments/sp.json",
		"--rates", "../signals/testdata/commitments/rates-sp-0a1b2c3d.json", "--reserved-instances", "../signals/testdata/commitments/ri.json", "--dry-run")
	if code != ExitOK {
		t.Fatalf("signals commitments: exit %d: %s", code, stderr)
	}
	return strings.ReplaceAll(out, `"2027-`, `"2099-`)
}

// weights are the rendered NodePools' weights by name.
func weights(t *testing.T, out string) map[string]int64 {
	t.Helper()
	objs, err := manifest.Decode("stdout", strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	w := map[string]int64{}
	for _, o := range objs {
		if o.GetKind() == "NodePool" {
			v, _, _ := unstructuredInt(o.Object, "spec", "weight")
			w[o.GetName()] = v
		}
	}
	return w
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	}
	return 0, false, nil
}

// The export `signals commitments` writes completes a Baseline entry naming only id and
// share: rendered with it, by --signals (the ConfigMap) or --commitments-file (the bare
// document), the class gets the weights of the fully declared plan; without it the entry
// is refused naming the field.
func TestRenderTakesTheFactsFromTheExport(t *testing.T) {
	code, out, stderr := run(t, "", "render", "-f", "testdata/commitments.yaml")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := weights(t, out)
	if want["api-on-demand-arm64-m7g-xlarge"] != 100 {
		t.Fatalf("the declared plan ranks %v; want the covered m7g rung first", want)
	}
	cmFile := writeTemp(t, "signals.yaml", signalsCommitments(t))
	cm := &corev1.ConfigMap{}
	data, _ := os.ReadFile(cmFile)
	if err := yaml.Unmarshal(data, cm); err != nil {
		t.Fatal(err)
	}
	bare := writeTemp(t, "commitments.json", cm.Data[signals.CommitmentsKey])
	input := idAndShare(t)
	for _, flags := range [][]string{{"--signals", cmFile}, {"--commitments-file", bare}} {
		code, out, stderr := run(t, "", append([]string{"render", "-f", input}, flags...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", flags, code, stderr)
		}
		got := weights(t, out)
		if len(got) != len(want) {
			t.Errorf("%v: rungs %v, want %v", flags, got, want)
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%v: %s weighs %d, want %d as with the declared plan", flags, name, got[name], w)
			}
		}
	}

	code, _, stderr = run(t, "", "render", "-f", input)
	if code == ExitOK || !strings.Contains(stderr, "spec.commitments.savingsPlans[0].id: sp-0a1b2c3d has no facts in the Baseline or the signals' commitments.json") {
		t.Errorf("without the export: exit %d, stderr %s", code, stderr)
	}
	corrupt := writeTemp(t, "corrupt.json", strings.Replace(cm.Data[signals.CommitmentsKey], `"commitment": "3.0"`, `"commitment": "-3"`, 1))
	code, _, stderr = run(t, "", "render", "-f", input, "--commitments-file", corrupt)
	if code == ExitOK || !strings.Contains(stderr, `commitments.json: savingsPlans[0] (sp-0a1b2c3d).commitment "-3" is not more than 0`) {
		t.Errorf("a corrupt export: exit %d, stderr %s", code, stderr)
	}
}

// explain names the layer of each fact: the export's, with its date, or the Baseline's.
func TestExplainShowsEachFactsOrigin(t *testing.T) {
	cmFile := writeTemp(t, "signals.yaml", signalsCommitments(t))
	code, out, stderr := run(t, "", "explain", "-f", idAndShare(t), "--signals", cmFile)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range [][]string{
		{"WorkloadClass/api", "commitments[sp-0a1b2c3d].commitment", "3.0", "signals:commitments 20"},
		{"WorkloadClass/api", "commitments[sp-0a1b2c3d].rates", "2 instance types in us-east-1", "signals:commitments 20"},
		{"WorkloadClass/api", "commitments[sp-0a1b2c3d]", "share $1.2000/h: Open"},
		{"NodePool/api-on-demand-arm64-m7g-xlarge", "spec.weight", "100", "signals:commitments 20"},
	} {
		if !hasLine(out, want...) {
			t.Errorf("explain output has no line with %q:\n%s", want, out)
		}
	}
}

// lint reports an entry without facts as an error, and an export older than 30 days.
func TestLintCommitmentExport(t *testing.T) {
	code, out, _ := run(t, "", "lint", "-f", idAndShare(t))
	if code != ExitFindings || !hasLine(out, "error", "Baseline/default", "commitment-unresolved", "spec.commitments.savingsPlans[0].id: sp-0a1b2c3d has no facts") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal([]byte(signalsCommitments(t)), cm); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(cm.Data[signals.CommitmentsKey]), &doc); err != nil {
		t.Fatal(err)
	}
	doc["exportedAt"] = "2026-01-02T12:00:00Z"
	old, _ := json.Marshal(doc)
	code, out, stderr := run(t, "", "lint", "-f", idAndShare(t), "--commitments-file", writeTemp(t, "old.json", string(old)))
	if code != ExitOK || !hasLine(out, "warning", "commitments.json", "commitments-export-old", "exported 2026-01-02T12:00:00Z") ||
		strings.Contains(out, "commitment-unresolved") {
		t.Errorf("exit %d:\n%s%s", code, out, stderr)
	}
}
