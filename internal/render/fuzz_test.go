package render_test

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/validate"
)

// FuzzRender feeds arbitrary WorkloadClass specs (as JSON) to the renderer. Render must
// never panic, and whatever it accepts must have distinct weights in 1..100, rung names
// that are DNS subdomains and label values, requirements Karpenter accepts, no negative
// limit, and every Baseline-only field and mandatory Baseline tag and label intact; when
// admission would accept the class, Karpenter's CRDs must accept every rendered object.
func FuzzRender(f *testing.F) {
	classes, _ := goldenInputs(f)
	for _, wc := range classes {
		seed, err := json.Marshal(wc.Spec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add("fuzz", seed)
	}
	f.Add("x", []byte(`{"consistency":"Family","instances":{"families":["a","b","c","d","e","f","g","h","i","j","k"]}}`))
	f.Add("long", []byte(`{"capacityTypes":["spot","on-demand","reserved"],"weighting":{"ceiling":6}}`))
	f.Add("weird", []byte(`{"instances":{"cpu":{"min":8,"max":2},"memory":{"min":"1Ki"}},"nodeClass":{"kubelet":{"maxPods":"x"}}}`))
	f.Add("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbb", []byte(`{"instances":{"memory":{"min":"4194305Gi","max":"10Pi"},"cpu":{"max":2147483647}},"limits":{"cpu":"-5"}}`))
	f.Add("req", []byte(`{"requirements":[{"key":"karpenter.k8s.aws/instance-cpu","operator":"Gt","values":["-1"]},{"key":"karpenter.sh/nodepool","operator":"In","values":[]}]}`))

	b := baseline()
	crds, err := validate.Default()
	if err != nil {
		f.Fatal(err)
	}
	integer := regexp.MustCompile(`^[0-9]+$`)
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		wc := &v1alpha1.WorkloadClass{}
		if json.Unmarshal(spec, &wc.Spec) != nil || len(validation.IsDNS1123Subdomain(name)) > 0 || len(name) > 63 {
			return
		}
		wc.Name = name
		res, err := render.Render(b, wc, render.Options{})
		if err != nil {
			if _, ok := err.(render.Errors); !ok {
				t.Fatalf("render returned %T, want render.Errors: %v", err, err)
			}
			return
		}
		// Whatever admission accepts and render produces, Karpenter's CRDs must accept
		// (checked in-process, with the API server's own code).
		var specDoc map[string]any
		_ = json.Unmarshal(spec, &specDoc)
		classDoc := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "WorkloadClass", "metadata": map[string]any{"name": name}, "spec": specDoc}
		if crds.Create(classDoc) == nil {
			docs, err := res.Objects()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				if err := crds.Create(d); err != nil {
					t.Errorf("admission accepts the class but Karpenter's CRDs refuse what it renders: %v", err)
				}
			}
		}
		seen := map[int32]string{}
		for i, np := range res.NodePools {
			w := *np.Spec.Weight
			if w < 1 || w > 100 {
				t.Errorf("rung %s weight %d outside 1..100", np.Name, w)
			}
			if other, dup := seen[w]; dup {
				t.Errorf("rungs %s and %s share weight %d", other, np.Name, w)
			}
			seen[w] = np.Name
			if bad := append(validation.IsDNS1123Subdomain(np.Name), validation.IsValidLabelValue(np.Name)...); len(bad) > 0 {
				t.Errorf("invalid rung name %q: %v", np.Name, bad)
			}
			for _, req := range np.Spec.Template.Spec.Requirements {
				if err := karpv1.ValidateRequirement(context.Background(), req); err != nil {
					t.Errorf("rung %s: Karpenter refuses requirement %v: %v", np.Name, req, err)
				}
				if len(req.Values) == 1 && (req.Operator == corev1.NodeSelectorOpGt || req.Operator == corev1.NodeSelectorOpLt) && !integer.MatchString(req.Values[0]) {
					t.Errorf("rung %s: %s %s %q is no non-negative integer", np.Name, req.Key, req.Operator, req.Values[0])
				}
			}
			for _, q := range np.Spec.Limits {
				if q.Sign() < 0 {
					t.Errorf("rung %s: negative limit %s", np.Name, q.String())
				}
			}
			if res.Rungs[i].Name != np.Name {
				t.Errorf("rung %d: %s != %s", i, res.Rungs[i].Name, np.Name)
			}
			for k, v := range b.Spec.NodePool.Labels {
				if np.Spec.Template.Labels[k] != v {
					t.Errorf("rung %s lost Baseline label %s", np.Name, k)
				}
			}
		}
		got, want := res.NodeClass.Spec, b.Spec.NodeClass
		if got.Role != want.Role || got.InstanceProfile != nil ||
			!reflect.DeepEqual(got.SubnetSelectorTerms, want.SubnetSelectorTerms) ||
			!reflect.DeepEqual(got.SecurityGroupSelectorTerms, want.SecurityGroupSelectorTerms) ||
			*got.MetadataOptions.HTTPTokens != *want.MetadataOptions.HTTPTokens ||
			*got.MetadataOptions.HTTPPutResponseHopLimit != *want.MetadataOptions.HTTPPutResponseHopLimit {
			t.Errorf("Baseline-only fields changed: %+v", got)
		}
		for k, v := range want.Tags {
			if got.Tags[k] != v {
				t.Errorf("Baseline tag %s = %q, want %q", k, got.Tags[k], v)
			}
		}
		if root := got.BlockDeviceMappings[0].EBS; !*root.Encrypted || *root.KMSKeyID != *want.BlockDeviceMappings[0].EBS.KMSKeyID {
			t.Errorf("root volume lost the Baseline's encryption: %+v", root)
		}
	})
}
