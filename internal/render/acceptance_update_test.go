package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/classgen"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// updateClasses is how many generated classes the update check stores and then updates,
// on the real CRDs and on the loosened-then-tightened copy; POOLSMITH_FUZZ_E2E_UPDATES
// raises it.
func updateClasses() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("POOLSMITH_FUZZ_E2E_UPDATES"), &n); err == nil && n > 0 {
		return n
	}
	return 250
}

// updateAgreement compares the API server's verdict on an update (a server-side dry run at
// the live resourceVersion) with the validator's, and counts what it saw under what.
type updateAgreement struct {
	ctx           context.Context
	counts        map[string]int
	disagreements []string
}

func (a *updateAgreement) judge(what string, v *validate.Validator, next, live map[string]any) error {
	u := &unstructured.Unstructured{Object: next}
	sent, err := validate.Normalize(next)
	Expect(err).NotTo(HaveOccurred())
	serverErr := env.Client.Update(a.ctx, &unstructured.Unstructured{Object: sent}, client.DryRunAll)
	localErr := v.Update(next, live)
	if (serverErr == nil) != (localErr == nil) {
		a.disagreements = append(a.disagreements, fmt.Sprintf("%s, %s %s: server %v; validator %v", what, u.GetKind(), u.GetName(), serverErr, localErr))
	}
	a.counts["updates"]++
	if serverErr == nil {
		a.counts[what+": accepted"]++
	} else {
		a.counts[what+": refused"]++
	}
	return serverErr
}

// live is obj as the API server stores it.
func live(ctx context.Context, obj map[string]any) map[string]any {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(obj["apiVersion"].(string))
	u.SetKind(obj["kind"].(string))
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: (&unstructured.Unstructured{Object: obj}).GetName()}, u)).To(Succeed())
	return u.Object
}

// edited is a deep copy of doc changed by edit.
func edited(doc map[string]any, edit func(map[string]any)) map[string]any {
	out, err := validate.Normalize(doc)
	Expect(err).NotTo(HaveOccurred())
	edit(out)
	return out
}

func withSpecOf(from map[string]any) func(map[string]any) {
	return func(doc map[string]any) { doc["spec"] = from["spec"] }
}

func labelled(doc map[string]any) {
	u := &unstructured.Unstructured{Object: doc}
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["example.com/touched"] = "yes"
	u.SetLabels(l)
}

func setField(value any, path ...string) func(map[string]any) {
	return func(doc map[string]any) {
		Expect(unstructured.SetNestedField(doc, value, path...)).To(Succeed())
	}
}

// loosened is crd under group, its schema stripped of every bound, pattern, enum and CEL
// rule, so that it stores values the real CRD refuses.
func loosened(crd *apiextensionsv1.CustomResourceDefinition, group string) *apiextensionsv1.CustomResourceDefinition {
	out := crd.DeepCopy()
	for i := range out.Spec.Versions {
		loosen(out.Spec.Versions[i].Schema.OpenAPIV3Schema)
	}
	return regrouped(out, group)
}

func regrouped(crd *apiextensionsv1.CustomResourceDefinition, group string) *apiextensionsv1.CustomResourceDefinition {
	out := crd.DeepCopy()
	out.Spec.Group = group
	out.Name = out.Spec.Names.Plural + "." + group
	out.ResourceVersion = ""
	return out
}

func loosen(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.XValidations = nil
	s.Maximum, s.Minimum, s.ExclusiveMaximum, s.ExclusiveMinimum = nil, nil, false, false
	s.MaxLength, s.MinLength, s.MaxItems, s.MinItems, s.MaxProperties, s.MinProperties = nil, nil, nil, nil, nil, nil
	s.Pattern, s.Enum = "", nil
	for k, p := range s.Properties {
		loosen(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		loosen(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			loosen(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		loosen(s.AdditionalProperties.Schema)
	}
	for _, l := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range l {
			loosen(&l[i])
		}
	}
	loosen(s.Not)
}

var _ = Describe("Generated updates, end to end", func() {
	It("are judged by the in-process validator as by the API server: transition rules see the live object, and invalid values already stored ratchet", func() {
		const seed = 20261202
		ctx := context.Background()
		a := &updateAgreement{ctx: ctx, counts: map[string]int{}}
		v, err := validate.Default()
		Expect(err).NotTo(HaveOccurred())
		b := baseline()

		By("children on Karpenter's real CRDs: re-rendered from another class, and edits its transition rules refuse")
		// What this spec stores it deletes: the create check generates the same names.
		var created []*unstructured.Unstructured
		DeferCleanup(func() {
			for _, u := range created {
				Expect(client.IgnoreNotFound(env.Client.Delete(context.Background(), u))).To(Succeed())
			}
		})
		create := func(doc map[string]any) error {
			u := &unstructured.Unstructured{Object: edited(doc, func(map[string]any) {})}
			err := env.Client.Create(ctx, u)
			if err == nil {
				created = append(created, u)
			}
			return err
		}
		g := classgen.New(seed)
		stored := 0
		for stored < updateClasses()/2 {
			doc := g.Class("default")
			next := g.Class("default")
			wc, ok := decodeClass(doc)
			if !ok || create(doc) != nil {
				continue
			}
			stored++
			next["metadata"] = doc["metadata"]
			a.judge("class re-generated", v, edited(live(ctx, doc), withSpecOf(next)), live(ctx, doc))
			res, err := render.Render(b, wc, render.Options{})
			if err != nil {
				continue
			}
			docs, err := res.Objects()
			Expect(err).NotTo(HaveOccurred())
			nextDocs := map[string]map[string]any{}
			if nwc, ok := decodeClass(next); ok {
				if nres, err := render.Render(b, nwc, render.Options{}); err == nil {
					nd, err := nres.Objects()
					Expect(err).NotTo(HaveOccurred())
					for _, d := range nd {
						u := &unstructured.Unstructured{Object: d}
						nextDocs[u.GetKind()+"/"+u.GetName()] = d
					}
				}
			}
			for _, d := range docs {
				u := &unstructured.Unstructured{Object: d}
				if validate.IsPolicy(u.GroupVersionKind()) {
					continue // no CRD: the validator only compiles their CEL (policy.go)
				}
				Expect(create(d)).To(Succeed(), "%s %s", u.GetKind(), u.GetName())
				old := live(ctx, d)
				a.judge("child unchanged", v, edited(old, labelled), old)
				if n, ok := nextDocs[u.GetKind()+"/"+u.GetName()]; ok {
					a.judge("child re-rendered", v, edited(old, withSpecOf(n)), old)
				}
				if u.GetKind() != "NodePool" {
					continue
				}
				for what, edit := range map[string]func(map[string]any){
					"nodeClassRef.group changed": setField("example.com", "spec", "template", "spec", "nodeClassRef", "group"),
					"nodeClassRef.kind changed":  setField("OtherNodeClass", "spec", "template", "spec", "nodeClassRef", "kind"),
					"replicas set":               setField(int64(2), "spec", "replicas"),
					"weight out of bounds":       setField(int64(101), "spec", "weight"),
				} {
					if err := a.judge(what, v, edited(old, edit), old); err != nil && strings.Contains(err.Error(), "immutable") {
						a.counts["refused by a transition rule"]++
					}
				}
			}
		}

		By("classes stored under a loosened copy of the WorkloadClass CRD, updated once the real schema is back")
		wcCRD := &apiextensionsv1.CustomResourceDefinition{}
		raw, err := os.ReadFile("../../config/crd/bases/poolsmith.dev_workloadclasses.yaml")
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.UnmarshalStrict(raw, wcCRD)).To(Succeed())
		const group = "ratchet.poolsmith.dev"
		crd := loosened(wcCRD, group)
		Expect(env.Client.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func() { Expect(env.Client.Delete(context.Background(), crd)).To(Succeed()) })
		strict := regrouped(wcCRD, group)
		vs, err := validate.New([]*apiextensionsv1.CustomResourceDefinition{strict})
		Expect(err).NotTo(HaveOccurred())

		regroup := func(doc map[string]any) map[string]any {
			doc["apiVersion"] = group + "/v1alpha1"
			return doc
		}
		// Hand-made classes whose outcome is known: a schema bound and a CEL rule, each
		// broken when stored, then kept or changed.
		ceiling := regroup(load(`{kind: WorkloadClass, metadata: {name: ratchet-ceiling}, spec: {weighting: {strategy: Static, ceiling: 1000}}}`))
		labels := regroup(load(`{kind: WorkloadClass, metadata: {name: ratchet-labels}, spec: {labels: {"-bad key": a}}}`))
		Eventually(func() error {
			return env.Client.Create(ctx, &unstructured.Unstructured{Object: edited(ceiling, func(map[string]any) {})}, client.DryRunAll)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		var storedInvalid []map[string]any
		for _, d := range []map[string]any{ceiling, labels} {
			Expect(env.Client.Create(ctx, &unstructured.Unstructured{Object: edited(d, func(map[string]any) {})})).To(Succeed())
			storedInvalid = append(storedInvalid, d)
		}
		g = classgen.New(seed + 1)
		for range updateClasses() {
			doc := regroup(g.Class("default"))
			if env.Client.Create(ctx, &unstructured.Unstructured{Object: edited(doc, func(map[string]any) {})}) != nil {
				continue
			}
			a.counts["stored under the loosened CRD"]++
			if vs.Create(doc) != nil {
				storedInvalid = append(storedInvalid, doc)
			}
		}

		latest := &apiextensionsv1.CustomResourceDefinition{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), latest)).To(Succeed())
		latest.Spec.Versions = strict.Spec.Versions
		Expect(env.Client.Update(ctx, latest)).To(Succeed())
		Eventually(func() error {
			probe := edited(ceiling, func(d map[string]any) { d["metadata"] = map[string]any{"name": "probe"} })
			return env.Client.Create(ctx, &unstructured.Unstructured{Object: probe}, client.DryRunAll)
		}).WithTimeout(30*time.Second).ShouldNot(Succeed(), "the API server keeps the loosened schema")

		verdict := func(what string, next, old map[string]any) error {
			err := a.judge(what, vs, next, old)
			if err == nil && vs.Create(next) != nil {
				a.counts["ratcheted (accepted though invalid as a create)"]++
			}
			return err
		}
		for _, d := range storedInvalid {
			old := live(ctx, d)
			verdict("stored invalid, labels added", edited(old, labelled), old)
			verdict("stored invalid, spec re-generated", edited(old, withSpecOf(regroup(g.Class("default")))), old)
		}
		old := live(ctx, ceiling)
		Expect(verdict("ceiling unchanged", edited(old, labelled), old)).To(Succeed(), "an invalid value already stored and unchanged ratchets")
		Expect(verdict("ceiling unchanged, profile set", edited(old, setField("GPU", "spec", "profile")), old)).To(Succeed())
		Expect(verdict("ceiling changed", edited(old, setField(int64(1001), "spec", "weighting", "ceiling")), old)).To(MatchError(ContainSubstring("spec.weighting.ceiling")))
		old = live(ctx, labels)
		Expect(verdict("labels unchanged", edited(old, labelled), old)).To(Succeed(), "a CEL rule on an unchanged map ratchets")
		Expect(verdict("labels changed", edited(old, setField("b", "spec", "labels", "team")), old)).To(MatchError(ContainSubstring("label keys must be qualified names")))

		GinkgoWriter.Printf("generated updates (seed %d): %v; validator disagreements %d\n", seed, a.counts, len(a.disagreements))
		for _, m := range a.disagreements {
			GinkgoWriter.Println(m)
		}
		Expect(a.disagreements).To(BeEmpty(), "the in-process validator must judge every update as the API server does")
		Expect(a.counts["refused by a transition rule"]).To(BeNumerically(">", 0))
		Expect(a.counts["ratcheted (accepted though invalid as a create)"]).To(BeNumerically(">", 2))
		Expect(a.counts["stored invalid, spec re-generated: refused"]).To(BeNumerically(">", 0))
	})
})

func decodeClass(doc map[string]any) (*v1alpha1.WorkloadClass, bool) {
	raw, err := json.Marshal(doc)
	Expect(err).NotTo(HaveOccurred())
	wc := &v1alpha1.WorkloadClass{}
	return wc, json.Unmarshal(raw, wc) == nil
}

func load(doc string) map[string]any {
	var m map[string]any
	Expect(yaml.Unmarshal([]byte(doc), &m)).To(Succeed())
	return m
}
