package validate

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const verdictPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ci-spot-arm64}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ci}
      expireAfter: 720h
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [arm64]}
`

func verdictDoc(t *testing.T, edits ...string) map[string]any {
	t.Helper()
	doc := verdictPool
	for i := 0; i+1 < len(edits); i += 2 {
		doc = strings.Replace(doc, edits[i], edits[i+1], 1)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The same JSON judged again is not judged again, and the verdict depends on everything
// it is a function of: the operation, the object, and the live object of an update.
func TestVerdictsRemembered(t *testing.T) {
	v, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	judged := func() int64 { return v.verdicts.judged.Load() }

	pool := verdictDoc(t)
	before := judged()
	for range 3 {
		if err := v.Create(verdictDoc(t)); err != nil {
			t.Fatalf("a valid NodePool was refused: %v", err)
		}
	}
	if n := judged() - before; n != 1 {
		t.Errorf("three creates of the same NodePool were judged %d times, want 1", n)
	}

	// An update that changes the immutable nodeClassRef.group: refused against the live
	// object that holds the old group, accepted against one that already holds the new.
	moved := verdictDoc(t, "group: karpenter.k8s.aws", "group: example.com")
	for range 2 {
		if err := v.Update(moved, pool); err == nil || !strings.Contains(err.Error(), "nodeClassRef.group is immutable") {
			t.Fatalf("changing nodeClassRef.group: got %v, want the transition rule's refusal", err)
		}
		if err := v.Update(moved, moved); err != nil && strings.Contains(err.Error(), "immutable") {
			t.Fatalf("an unchanged nodeClassRef.group was refused: %v", err)
		}
	}
	// A create of the same object is a different question from its updates.
	if err := v.Create(moved); err != nil && strings.Contains(err.Error(), "immutable") {
		t.Fatalf("a create met a transition rule: %v", err)
	}
	// One byte of difference is judged afresh.
	bad := verdictDoc(t, "values: [arm64]", "values: []")
	if err := v.Create(bad); err == nil {
		t.Fatalf("In with no values was accepted")
	}
	if err := v.Create(bad); err == nil {
		t.Fatalf("In with no values was accepted the second time")
	}
	if n := judged() - before; n != 5 {
		t.Errorf("judged %d times, want 5 (one create, two updates, the moved create, the bad create)", n)
	}
}

// Default builds each kind when it is first judged; every kind it knows must build.
func TestDefaultBuildsEveryKind(t *testing.T) {
	v, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.kinds) < 7 {
		t.Fatalf("Default knows %d kinds, want Karpenter's and Poolsmith's", len(v.kinds))
	}
	for gvk, k := range v.kinds {
		if _, err := k.get(); err != nil {
			t.Errorf("%s: %v", gvk, err)
		}
	}
}
