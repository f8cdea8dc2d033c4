package render_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/classgen"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
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

// fuzzClasses is how many generated classes the end-to-end check sends through admission,
// the renderer and Karpenter's CRDs; POOLSMITH_FUZZ_E2E_CLASSES raises it.
func fuzzClasses() int {
	if n, err := strconv.Atoi(os.Getenv("POOLSMITH_FUZZ_E2E_CLASSES")); err == nil && n > 0 {
		return n
	}
	return 1500
}

var _ = Describe("Generated classes, end to end", func() {
	It("render, whenever admission accepts them, to objects Karpenter's CRDs accept; the in-process validator agrees with the API server on every object", func() {
		const seed = 20261201
		ctx := context.Background()
		v, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		b := baseline()
		g := classgen.New(seed)
		var disagreements, refused, undecodable []string
		counts := map[string]int{}
		var mu sync.Mutex // guards the three lists and counts: classes are judged in parallel
		// verdict asks the API server (a server-side dry-run create) and the validator.
		verdict := func(doc map[string]any) error {
			u := &unstructured.Unstructured{Object: doc}
			serverErr := env.Client.Create(ctx, u.DeepCopy(), client.DryRunAll)
			localErr := v.Create(doc)
			mu.Lock()
			defer mu.Unlock()
			if (serverErr == nil) != (localErr == nil) {
				disagreements = append(disagreements, fmt.Sprintf("%s %s: server %v; validator %v", u.GetKind(), u.GetName(), serverErr, localErr))
			}
			counts["objects"]++
			return serverErr
		}
		count := func(what string, n int) {
			mu.Lock()
			defer mu.Unlock()
			counts[what] += n
		}
		judge := func(doc map[string]any) {
			if verdict(doc) != nil {
				count("refused by admission", 1)
				return
			}
			count("admitted", 1)
			// The manager decodes classes into the typed API: one it cannot decode would
			// break its cache for every class.
			wc := &v1alpha1.WorkloadClass{}
			raw, _ := json.Marshal(doc)
			if err := json.Unmarshal(raw, wc); err != nil {
				mu.Lock()
				undecodable = append(undecodable, fmt.Sprintf("%s: %v", raw, err))
				mu.Unlock()
				return
			}
			res, err := render.Render(b, wc, render.Options{})
			if err != nil {
				count("refused by render", 1)
				return
			}
			docs, err := res.Objects()
			Expect(err).NotTo(HaveOccurred())
			for _, d := range docs {
				if err := verdict(d); err != nil {
					mu.Lock()
					refused = append(refused, fmt.Sprintf("class %s: %v", wc.Name, err))
					mu.Unlock()
				}
				count("rendered objects", 1)
			}
		}
		// The generator is seeded, so classes are drawn in order; each class's dry runs are
		// independent of the others', so they are judged by a few workers at once (the API
		// server is the bottleneck, and one request at a time left a core idle).
		classes := make(chan map[string]any, fuzzClasses())
		for range fuzzClasses() {
			classes <- g.Class("default")
		}
		close(classes)
		var workers sync.WaitGroup
		for range 4 {
			workers.Go(func() {
				defer GinkgoRecover()
				for doc := range classes {
					judge(doc)
				}
			})
		}
		workers.Wait()
		sort.Strings(disagreements)
		sort.Strings(refused)
		sort.Strings(undecodable)
		GinkgoWriter.Printf("generated classes (seed %d): %v; refused rendered objects %d; validator disagreements %d; undecodable %d\n", seed, counts, len(refused), len(disagreements), len(undecodable))
		for _, l := range [][]string{disagreements, refused, undecodable} {
			for _, m := range l {
				GinkgoWriter.Println(m)
			}
		}
		Expect(undecodable).To(BeEmpty(), "admission must refuse what the manager cannot decode")
		Expect(disagreements).To(BeEmpty(), "the in-process validator must judge every object as the API server does")
		Expect(refused).To(BeEmpty(), "whatever admission accepts and render produces, Karpenter's CRDs must accept")
		Expect(counts["admitted"]).To(BeNumerically(">", 0))
		Expect(counts["refused by admission"]).To(BeNumerically(">", 0))
	})
})
