package validate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/validate"
)

func load(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const nodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ci-spot-arm64}
spec:
  weight: 10
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ci}
      expireAfter: 720h
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [arm64]}
`

func TestKarpenterRulesApply(t *testing.T) {
	v, err := validate.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Create(load(t, nodePool)); err != nil {
		t.Fatalf("a valid NodePool was refused: %v", err)
	}
	cases := map[string]struct{ edit, want string }{
		"Gt with a negative value": {`- {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["-1"]}`, "spec.template.spec.requirements"},
		"In with no values":        {`- {key: karpenter.k8s.aws/instance-family, operator: In, values: []}`, "spec.template.spec.requirements"},
		"Lt with a word":           {`- {key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["abc"]}`, "spec.template.spec.requirements"},
		"Gt with two values":       {`- {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["1", "2"]}`, "spec.template.spec.requirements"},
		"restricted key":           {`- {key: karpenter.sh/nodepool, operator: In, values: [x]}`, "restricted"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			doc := load(t, nodePool+"      "+c.edit+"\n")
			err := v.Create(doc)
			if err == nil {
				t.Fatalf("accepted; Karpenter's CRD refuses it")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestNameRulesApply(t *testing.T) {
	v, _ := validate.Default()
	doc := load(t, strings.Replace(nodePool, "name: ci-spot-arm64", "name: ci.-1b6d841f", 1))
	if err := v.Create(doc); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("want a metadata.name error, got %v", err)
	}
}

func TestUnknownFieldsAreRefused(t *testing.T) {
	v, _ := validate.Default()
	doc := load(t, nodePool)
	doc["spec"].(map[string]any)["weigth"] = 3
	err := v.Create(doc)
	if err == nil || !strings.Contains(err.Error(), "spec.weigth") {
		t.Fatalf("want an unknown-field error naming spec.weigth, got %v", err)
	}
}

func TestDefaultedAddsCRDDefaults(t *testing.T) {
	v, _ := validate.Default()
	doc := load(t, nodePool)
	out, err := v.Defaulted(doc)
	if err != nil {
		t.Fatal(err)
	}
	budgets, _, _ := unstructuredSlice(out, "spec", "disruption", "budgets")
	if len(budgets) != 1 {
		t.Fatalf("Karpenter's CRD defaults one disruption budget; got %v", out["spec"])
	}
	if _, ok := doc["spec"].(map[string]any)["disruption"]; ok {
		t.Fatal("Defaulted modified its input")
	}
}

func TestUpdateSeesTheLiveObject(t *testing.T) {
	v, _ := validate.Default()
	// NodePool's nodeClassRef.group is immutable: a transition rule on oldSelf.
	live := load(t, strings.Replace(nodePool, "metadata: {name: ci-spot-arm64}", "metadata: {name: ci-spot-arm64, resourceVersion: \"7\"}", 1))
	next, _ := validate.Normalize(live)
	ref := next["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["nodeClassRef"].(map[string]any)
	ref["group"] = "example.com"
	if err := v.Create(next); err != nil {
		t.Fatalf("as a create the other group is valid: %v", err)
	}
	if err := v.Update(live, live); err != nil {
		t.Fatalf("an update that changes nothing was refused: %v", err)
	}
	err := v.Update(next, live)
	if err == nil || !strings.Contains(err.Error(), "nodeClassRef.group is immutable") {
		t.Fatalf("want Karpenter's transition rule to refuse the update, got %v", err)
	}
}

func TestPoolsmithSamplesPass(t *testing.T) {
	v, _ := validate.Default()
	files, _ := filepath.Glob("../../config/samples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no samples")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Create(load(t, string(b))); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	bad := load(t, `
apiVersion: poolsmith.dev/v1alpha1
kind: WorkloadClass
metadata: {name: General_Class}
spec:
  weighting: {ceiling: 1000}
`)
	err := v.Create(bad)
	if err == nil {
		t.Fatal("admission refuses this class; the validator accepted it")
	}
	for _, want := range []string{"metadata.name", "spec.weighting.ceiling"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func unstructuredSlice(m map[string]any, path ...string) ([]any, bool, error) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = mm[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
