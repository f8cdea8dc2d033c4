package decode

import (
	"strings"
	"testing"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

func TestIntoKeepsWhatDecodesAndNamesTheRest(t *testing.T) {
	data := `{"apiVersion":"poolsmith.dev/v1alpha1","kind":"WorkloadClass",
		"metadata":{"name":"bad","uid":"u1","generation":3,"finalizers":["poolsmith.dev/finalizer"]},
		"spec":{"baselineRef":{"name":"prod"},"prunePolicy":"Orphan","rebalance":{"policy":"Preferred","maxConcurrent":2147483648}},
		"status":{"observedGeneration":2}}`
	wc := &v1alpha1.WorkloadClass{}
	if err := Into([]byte(data), wc); err != nil {
		t.Fatal(err)
	}
	why := Error(wc)
	if !strings.HasPrefix(why, "spec.rebalance: ") || !strings.Contains(why, "2147483648") {
		t.Errorf("Error = %q; want spec.rebalance named with the number", why)
	}
	if wc.Name != "bad" || wc.UID != "u1" || wc.Generation != 3 || len(wc.Finalizers) != 1 {
		t.Errorf("metadata lost: %+v", wc.ObjectMeta)
	}
	if wc.BaselineName() != "prod" || wc.Spec.PrunePolicy != v1alpha1.PruneOrphan || wc.Spec.Rebalance != nil {
		t.Errorf("spec = %+v; want baselineRef and prunePolicy kept, rebalance left out", wc.Spec)
	}
	if wc.Status.ObservedGeneration != 2 {
		t.Errorf("status lost: %+v", wc.Status)
	}
	if !Failed(wc, "rebalance") || Failed(wc, "prunePolicy") {
		t.Errorf("Failed does not match %q", why)
	}
}

func TestIntoDropsAHandSetMark(t *testing.T) {
	data := `{"metadata":{"name":"good","annotations":{"poolsmith.dev/decode-error":"fake","a":"b"}},"spec":{"nodeClass":{"role":"r"}}}`
	b := &v1alpha1.Baseline{}
	if err := Into([]byte(data), b); err != nil {
		t.Fatal(err)
	}
	if Error(b) != "" || b.Annotations["a"] != "b" || b.Spec.NodeClass.Role != "r" {
		t.Errorf("got %+v", b.ObjectMeta)
	}
}

func TestIntoRefusesWhatHasNoMetadata(t *testing.T) {
	if err := Into([]byte(`{"metadata":{"name":5},"spec":{}}`), &v1alpha1.Baseline{}); err == nil {
		t.Error("want an error")
	}
}
