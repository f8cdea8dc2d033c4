package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	karpapis "github.com/aws/karpenter-provider-aws/pkg/apis"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coreapis "sigs.k8s.io/karpenter/pkg/apis"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	"sigs.k8s.io/yaml"

	poolsmithcrd "github.com/poolsmith/poolsmith/config/crd"
)

// kind is one served version of one CRD.
type kind struct {
	strategy   *crStrategy
	structural *structuralschema.Structural
}

// Validator checks objects against CRDs in-process, through the API server's own code.
type Validator struct {
	kinds map[schema.GroupVersionKind]*lazyKind
	// verdicts remembers Create's and Update's answers by the exact JSON judged.
	verdicts verdicts
}

// lazyKind is a kind built on first use: the manager judges writes of four kinds, and
// building the schemas and CEL programs of the others (NodeClaim, WorkloadClass, Baseline,
// CapacityBuffer, ...) would hold their memory for nothing.
type lazyKind struct {
	once  sync.Once
	build func() (*kind, error)
	k     *kind
	err   error
}

func (l *lazyKind) get() (*kind, error) {
	l.once.Do(func() { l.k, l.err = l.build() })
	return l.k, l.err
}

// New builds a validator for every served version of the CRDs.
func New(crds []*apiextensionsv1.CustomResourceDefinition) (*Validator, error) {
	v := newLazy(crds)
	for gvk, k := range v.kinds {
		if _, err := k.get(); err != nil {
			return nil, fmt.Errorf("CRD for %s: %w", gvk, err)
		}
	}
	return v, nil
}

// newLazy is New with each kind built when it is first judged: a CRD that does not build
// is refused then, with every object of its kind.
func newLazy(crds []*apiextensionsv1.CustomResourceDefinition) *Validator {
	v := &Validator{kinds: map[schema.GroupVersionKind]*lazyKind{}}
	for _, crd := range crds {
		for _, ver := range crd.Spec.Versions {
			if !ver.Served {
				continue
			}
			v.kinds[schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}] = &lazyKind{build: func() (*kind, error) {
				k, err := newKind(crd, ver)
				if err != nil {
					return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, ver.Name, err)
				}
				return k, nil
			}}
		}
	}
	return v
}

// newKind mirrors how kube-apiserver's CRD handler builds a version's strategy.
func newKind(crd *apiextensionsv1.CustomResourceDefinition, ver apiextensionsv1.CustomResourceDefinitionVersion) (*kind, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, ver.Name)
	if err != nil {
		return nil, err
	}
	if val == nil {
		return nil, fmt.Errorf("no schema")
	}
	internal := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	structural = structural.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(structural); err != nil {
		return nil, fmt.Errorf("pruning defaults: %w", err)
	}
	schemaValidator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	hasStatus := false
	var scale *apiextensionsinternal.CustomResourceSubresourceScale
	if sub, _ := apihelpers.GetSubresourcesForVersion(crd, ver.Name); sub != nil {
		hasStatus = sub.Status != nil
		if sub.Scale != nil {
			scale = &apiextensionsinternal.CustomResourceSubresourceScale{
				SpecReplicasPath:   sub.Scale.SpecReplicasPath,
				StatusReplicasPath: sub.Scale.StatusReplicasPath,
				LabelSelectorPath:  sub.Scale.LabelSelectorPath,
			}
		}
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
	s := newCRStrategy(gvk, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, schemaValidator, structural, hasStatus, scale)
	return &kind{strategy: s, structural: structural}, nil
}

var (
	defaultOnce      sync.Once
	defaultValidator *Validator
	defaultErr       error
)

// Default is the validator for Karpenter's CRDs (from the pinned karpenter-provider-aws
// module, which carries the AWS label rules, and the CapacityBuffer CRD from core
// Karpenter's, which the provider does not embed) and Poolsmith's own. It is built once, each
// kind when it is first judged (TestDefaultBuildsEveryKind builds them all).
func Default() (*Validator, error) {
	defaultOnce.Do(func() {
		crds := append([]*apiextensionsv1.CustomResourceDefinition{}, karpapis.CRDs...)
		// The provider embeds no CapacityBuffer CRD; core Karpenter's is the same file.
		for _, crd := range coreapis.CRDs {
			if crd.Spec.Group == cbv1beta1.Group {
				crds = append(crds, crd)
			}
		}
		own, err := poolsmithCRDs()
		if err != nil {
			defaultErr = err
			return
		}
		defaultValidator = newLazy(append(crds, own...))
	})
	return defaultValidator, defaultErr
}

func poolsmithCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := poolsmithcrd.Bases()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(f.YAML, crd); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f.Name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Known reports whether the validator has a schema for obj's apiVersion and kind, or
// checks it as one of the built-in admission policy kinds.
func (v *Validator) Known(gvk schema.GroupVersionKind) bool {
	_, ok := v.kinds[gvk]
	return ok || IsPolicy(gvk) || isBuiltin(gvk)
}

// Create returns the error the API server would answer a create of obj with, or nil.
// obj is an object's JSON form (see Object); it is not modified. The same JSON judged
// again gets the remembered verdict (verdicts.go).
func (v *Validator) Create(obj map[string]any) error {
	return v.judge(obj, nil, func(u, _ *unstructured.Unstructured, k *kind) error {
		k.strategy.PrepareForCreate(u)
		return invalid(u, k.strategy.Validate(context.Background(), u))
	})
}

// Update returns the error the API server would answer an update of old to obj with, or
// nil: transition rules (oldSelf) and ratcheting see the live object. The same pair
// judged again gets the remembered verdict (verdicts.go).
func (v *Validator) Update(obj, old map[string]any) error {
	if old == nil {
		old = map[string]any{}
	}
	return v.judge(obj, old, func(u, o *unstructured.Unstructured, k *kind) error {
		k.strategy.PrepareForUpdate(u, o)
		return invalid(u, k.strategy.ValidateUpdate(context.Background(), u, o))
	})
}

// judge is Create's and Update's shared path: the JSON judged (and, for an update, the
// live object's) keys the verdict memory; a miss decodes it, checks a built-in policy
// kind as such, and hands a CRD kind, prepared, to check. old is nil for a create.
func (v *Validator) judge(obj, old map[string]any, check func(u, o *unstructured.Unstructured, k *kind) error) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("marshalling %T: %w", obj, err)
	}
	op, ob := "create", []byte(nil)
	if old != nil {
		op = "update"
		if ob, err = json.Marshal(old); err != nil {
			return fmt.Errorf("the live object: marshalling %T: %w", old, err)
		}
	}
	return v.verdicts.judge(verdictKey(op, b, ob), func() error {
		doc, err := decodeJSON(b)
		if err != nil {
			return err
		}
		if doc, ok := policy(doc); ok {
			return checkPolicy(doc)
		}
		if isBuiltin((&unstructured.Unstructured{Object: doc}).GroupVersionKind()) {
			return checkBuiltin(doc)
		}
		u, k, err := v.prepareDoc(doc)
		if err != nil {
			return err
		}
		var o *unstructured.Unstructured
		if old != nil {
			oldDoc, err := decodeJSON(ob)
			if err != nil {
				return fmt.Errorf("the live object: %w", err)
			}
			if o, _, err = v.prepareDoc(oldDoc); err != nil {
				return fmt.Errorf("the live object: %w", err)
			}
		}
		return check(u, o, k)
	})
}

// Defaulted is obj as the API server would store it: unknown fields pruned and the CRD's
// defaults applied.
func (v *Validator) Defaulted(obj map[string]any) (map[string]any, error) {
	if doc, ok := policy(obj); ok {
		// Poolsmith renders every field the API server would default.
		return doc, nil
	}
	if isBuiltin((&unstructured.Unstructured{Object: obj}).GroupVersionKind()) {
		// The headroom Deployment and PodTemplate too (render.headroomPod).
		return Normalize(obj)
	}
	u, _, err := v.prepare(obj)
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}

// policy is obj normalized when it is one of the built-in admission policy kinds, which
// have no CRD (see policy.go).
func policy(obj map[string]any) (map[string]any, bool) {
	u := unstructured.Unstructured{Object: obj}
	if !IsPolicy(u.GroupVersionKind()) {
		return nil, false
	}
	doc, err := Normalize(obj)
	if err != nil {
		return obj, true
	}
	return doc, true
}

// prepare decodes obj the way the API server's CRD handler does before validation:
// numbers as integers where they are, unknown fields refused (as a strict field validation
// would), metadata coerced, defaults applied.
func (v *Validator) prepare(obj map[string]any) (*unstructured.Unstructured, *kind, error) {
	doc, err := Normalize(obj)
	if err != nil {
		return nil, nil, err
	}
	return v.prepareDoc(doc)
}

// prepareDoc is prepare of a document already normalized, which it changes.
func (v *Validator) prepareDoc(doc map[string]any) (*unstructured.Unstructured, *kind, error) {
	u := &unstructured.Unstructured{Object: doc}
	gvk := u.GroupVersionKind()
	lk, ok := v.kinds[gvk]
	if !ok {
		return nil, nil, fmt.Errorf("%s %q: no CRD is known for %s", gvk.Kind, u.GetName(), gvk.GroupVersion())
	}
	k, err := lk.get()
	if err != nil {
		return nil, nil, err
	}
	apiVersion, kindName := u.GetAPIVersion(), u.GetKind()
	unknown := structuralpruning.PruneWithOptions(u.Object, k.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	var errs field.ErrorList
	for _, p := range unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: p, BadValue: field.OmitValueType{}, Detail: fmt.Sprintf("unknown field %q", p)})
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, k.structural)
	if ferr, _ := schemaobjectmeta.CoerceWithOptions(nil, u.Object, k.structural, true, schemaobjectmeta.CoerceOptions{}); ferr != nil {
		errs = append(errs, ferr)
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kindName)
	if len(errs) > 0 {
		return nil, nil, invalid(u, errs)
	}
	structuraldefaulting.Default(u.Object, k.structural)
	return u, k, nil
}

// invalid is the API server's 422 for errs: the same message `kubectl apply` prints.
func invalid(u *unstructured.Unstructured, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(u.GroupVersionKind().GroupKind(), u.GetName(), errs)
}

// Causes are the field errors of an error Create or Update returned, one a line, each
// "path: message" as the API server words it.
func Causes(err error) []string {
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		return []string{err.Error()}
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		msg := c.Message
		if c.Field != "" && !strings.HasPrefix(msg, c.Field) {
			msg = c.Field + ": " + msg
		}
		out = append(out, msg)
	}
	if len(out) == 0 {
		return []string{err.Error()}
	}
	return out
}

// Normalize is a typed object's or a document's JSON form, a deep copy, through
// encoding/json (runtime's unstructured converter would turn a Karpenter NillableDuration
// into base64 bytes), with numbers decoded as the API server decodes them (int64 where
// integral), so documents from different sources compare equal.
func Normalize(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("marshalling %T: %w", obj, err)
	}
	return decodeJSON(b)
}

// decodeJSON decodes a JSON object as Normalize does: int64 where integral.
func decodeJSON(b []byte) (map[string]any, error) {
	var doc map[string]any
	if err := utiljson.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}
