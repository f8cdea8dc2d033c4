package observe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/decode"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// baselines is a Reader holding Baselines by name; err, when set, answers every Get.
type baselines struct {
	client.Reader
	items map[string]*v1alpha1.Baseline
	err   error
	gets  int
}

func (b *baselines) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	b.gets++
	if b.err != nil {
		return b.err
	}
	found, ok := b.items[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "baselines"}, key.Name)
	}
	found.DeepCopyInto(obj.(*v1alpha1.Baseline))
	return nil
}

// pricing counts its calls and prices with an empty catalog.
type pricing struct{ calls int }

func (p *pricing) Catalog(context.Context, client.Reader) (*catalog.Catalog, signals.Freshness, error) {
	p.calls++
	return &catalog.Catalog{}, signals.Freshness{Reason: v1alpha1.ReasonFresh}, nil
}

func baseline(name string, annotations map[string]string) *v1alpha1.Baseline {
	return &v1alpha1.Baseline{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestAssembleGathersTheBaselineThenThePricedCatalog(t *testing.T) {
	ctx := context.Background()
	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	reader := &baselines{items: map[string]*v1alpha1.Baseline{"default": baseline("default", map[string]string{"from": "cluster"})}}
	p := &pricing{}

	in, err := observe.Source{Reader: reader, Pricing: p}.Assemble(ctx, wc)
	if err != nil || in.Baseline == nil || in.Baseline.Annotations["from"] != "cluster" || in.Class != wc {
		t.Fatalf("from the cluster: %+v, %v", in, err)
	}
	if in.Options.Catalog == nil || in.Freshness.Reason != v1alpha1.ReasonFresh || p.calls != 1 {
		t.Errorf("the catalog is priced once a Baseline is found: %+v, %d calls", in.Freshness, p.calls)
	}

	// The given Baselines (the CLI's input) come first; the cluster is not asked.
	given := map[string]*v1alpha1.Baseline{"default": baseline("default", map[string]string{"from": "input"})}
	reader.gets = 0
	if in, _ := (observe.Source{Baselines: given, Reader: reader}).Assemble(ctx, wc); in.Baseline.Annotations["from"] != "input" || reader.gets != 0 {
		t.Errorf("given Baselines first: got %v after %d reads", in.Baseline.Annotations, reader.gets)
	}

	// Missing or undecodable: no Baseline or the one read, and the signals are not read.
	p.calls = 0
	missing := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.WorkloadClassSpec{BaselineRef: &v1alpha1.BaselineReference{Name: "gone"}}}
	if in, err := (observe.Source{Reader: reader, Pricing: p}).Assemble(ctx, missing); err != nil || in.Baseline != nil || p.calls != 0 {
		t.Errorf("missing Baseline: %v, %v, %d pricing calls", in.Baseline, err, p.calls)
	}
	reader.items["default"] = baseline("default", map[string]string{decode.AnnotationError: "spec.nodeClass: bad"})
	if in, err := (observe.Source{Reader: reader, Pricing: p}).Assemble(ctx, wc); err != nil || decode.Error(in.Baseline) == "" || p.calls != 0 {
		t.Errorf("undecodable Baseline: %v, %v, %d pricing calls", in.Baseline, err, p.calls)
	}

	// Any other read error is the caller's to return, naming the Baseline.
	reader.err = errors.New("connection refused")
	if _, err := (observe.Source{Reader: reader}).Assemble(ctx, wc); err == nil || !strings.Contains(err.Error(), "getting Baseline default: connection refused") {
		t.Errorf("read error: %v", err)
	}
}
