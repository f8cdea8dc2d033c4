package render_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"

	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/testenv"
)

var env *testenv.Env

// TestAcceptance runs the Ginkgo specs that need the real control plane.
func TestAcceptance(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Rendered objects against Karpenter's real CRDs")
}

var _ = BeforeSuite(func() {
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

var _ = Describe("Golden objects", func() {
	It("are all accepted by Karpenter's CRDs with a server-side dry run", func() {
		files, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).To(HaveLen(9))
		accepted := 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			objs, err := manifest.Decode(f, bytes.NewReader(data))
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				err := env.Client.Patch(context.Background(), o.Unstructured, client.Apply,
					client.FieldOwner("poolsmith"), client.DryRunAll, client.ForceOwnership)
				Expect(err).NotTo(HaveOccurred(), "%s", o.Where())
				accepted++
			}
		}
		Expect(accepted).To(BeNumerically(">=", 9+16))
	})

	It("would be rejected if they broke Karpenter's rules (the dry run really validates)", func() {
		objs, err := manifest.Load([]string{filepath.Join(goldenDir, "sample-ci.yaml")}, nil)
		Expect(err).NotTo(HaveOccurred())
		np := objs[1].Unstructured
		Expect(np.GetKind()).To(Equal("NodePool"))
		Expect(unstructured.SetNestedField(np.Object, int64(101), "spec", "weight")).To(Succeed())
		err = env.Client.Patch(context.Background(), np, client.Apply, client.FieldOwner("poolsmith"), client.DryRunAll, client.ForceOwnership)
		Expect(err).To(MatchError(ContainSubstring("spec.weight")))
	})
})

var _ = Describe("Borderline classes", func() {
	It("render objects Karpenter's CRDs accept: huge bounds, 18-digit integers, a '.' where the hash rule cuts", func() {
		classes := []*v1alpha1.WorkloadClass{
			class("mem", v1alpha1.ProfileGeneral, withMemory("4194305Gi", "10Pi")),
			class("mem-sat", v1alpha1.ProfileMemoryOptimized, withMemory("", "10Ei")),
			class("cpu-max", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Instances = &v1alpha1.InstanceShape{CPU: &v1alpha1.IntRange{Min: ptr.To[int32](math.MaxInt32), Max: ptr.To[int32](math.MaxInt32)}}
			}),
			class(strings.Repeat("a", 53)+"."+strings.Repeat("b", 9), v1alpha1.ProfileGeneral, withTypes("u-6tb1.metal", "m7i-flex.xlarge")),
			class("lte", v1alpha1.ProfileGeneral, func(wc *v1alpha1.WorkloadClass) {
				wc.Spec.Requirements = []v1alpha1.Requirement{{Key: render.LabelInstanceCPU, Operator: karpLte, Values: []string{"999999999999999999"}}}
			}),
		}
		b := baseline()
		for _, wc := range classes {
			res, err := render.Render(b, wc, render.Options{})
			Expect(err).NotTo(HaveOccurred(), wc.Name)
			objs, err := res.Objects()
			Expect(err).NotTo(HaveOccurred())
			for _, doc := range objs {
				u := &unstructured.Unstructured{Object: doc}
				err := env.Client.Patch(context.Background(), u, client.Apply, client.FieldOwner("poolsmith"), client.DryRunAll, client.ForceOwnership)
				Expect(err).NotTo(HaveOccurred(), "%s %s of class %s", u.GetKind(), u.GetName(), wc.Name)
			}
		}
	})
})
