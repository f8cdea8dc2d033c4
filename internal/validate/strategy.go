package validate

import (
	"context"
	"fmt"
	"math"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiextensionsfeatures "k8s.io/apiextensions-apiserver/pkg/features"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// crStrategy is the validating half of kube-apiserver's custom-resource strategy
// (k8s.io/apiextensions-apiserver/pkg/registry/customresource: strategy.go and
// validator.go), composed from the same lower-level packages that strategy composes. The
// registry package itself is not imported: it brings the generic registry, the storage
// layer and the etcd client into every binary that links this package, for code a
// validator never runs. Each method follows its namesake there step for step, so a
// version bump of k8s.io/apiextensions-apiserver is checked by reading that diff against
// this file (and by the agreement test in internal/render).
type crStrategy struct {
	gvk             schema.GroupVersionKind
	namespaceScoped bool
	schemaValidator apiservervalidation.SchemaValidator
	structural      *structuralschema.Structural
	celValidator    *cel.Validator
	// hasStatus is whether the version serves the /status subresource: then a create or
	// update of the main resource cannot set status.
	hasStatus bool
	scale     *apiextensionsinternal.CustomResourceSubresourceScale
}

func newCRStrategy(gvk schema.GroupVersionKind, namespaceScoped bool, schemaValidator apiservervalidation.SchemaValidator, structural *structuralschema.Structural, hasStatus bool, scale *apiextensionsinternal.CustomResourceSubresourceScale) *crStrategy {
	return &crStrategy{
		gvk:             gvk,
		namespaceScoped: namespaceScoped,
		schemaValidator: schemaValidator,
		structural:      structural,
		// The CEL programs are compiled once here, with the server's per-call cost limit.
		celValidator: cel.NewValidator(structural, true, celconfig.PerCallLimit),
		hasStatus:    hasStatus,
		scale:        scale,
	}
}

// PrepareForCreate is customResourceStrategy.PrepareForCreate.
func (s *crStrategy) PrepareForCreate(u *unstructured.Unstructured) {
	if s.hasStatus {
		delete(u.Object, "status")
	}
	u.SetGeneration(1)
}

// PrepareForUpdate is customResourceStrategy.PrepareForUpdate.
func (s *crStrategy) PrepareForUpdate(u, old *unstructured.Unstructured) {
	if s.hasStatus {
		_, inNew := u.Object["status"]
		_, inOld := old.Object["status"]
		switch {
		case inOld:
			u.Object["status"] = old.Object["status"]
		case inNew:
			delete(u.Object, "status")
		}
	}
	if !apiequality.Semantic.DeepEqual(withoutMetadata(u.Object), withoutMetadata(old.Object)) {
		u.SetGeneration(old.GetGeneration() + 1)
	}
}

func withoutMetadata(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// Validate is customResourceStrategy.Validate.
func (s *crStrategy) Validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, s.validateResource(ctx, u)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	return append(errs, s.validateCEL(ctx, errs, u.Object, nil)...)
}

// ValidateUpdate is customResourceStrategy.ValidateUpdate: the OpenAPI schema and the CEL
// rules ratchet (an invalid value the live object already holds, unchanged, passes), the
// list-type invariants are checked only when the live object meets them, and transition
// rules see oldSelf.
func (s *crStrategy) ValidateUpdate(ctx context.Context, u, old *unstructured.Unstructured) field.ErrorList {
	var options []apiservervalidation.ValidationOption
	var celOptions []cel.Option
	if utilfeature.DefaultFeatureGate.Enabled(apiextensionsfeatures.CRDValidationRatcheting) {
		correlated := common.NewCorrelatedObject(u.Object, old.Object, &model.Structural{Structural: s.structural})
		options = append(options, apiservervalidation.WithRatcheting(correlated))
		celOptions = append(celOptions, cel.WithRatcheting(correlated))
	}
	var errs field.ErrorList
	errs = append(errs, s.validateResourceUpdate(ctx, u, old, options...)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.structural, false)...)
	if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, s.structural, old.Object); len(oldErrs) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	}
	return append(errs, s.validateCEL(ctx, errs, u.Object, old.Object, celOptions...)...)
}

// validateCEL runs the x-kubernetes-validations rules within the server's cost budget,
// unless errs already holds a blocking error; a schema without rules has no validator and
// adds nothing, not even the blocking note, as in the strategy.
func (s *crStrategy) validateCEL(ctx context.Context, errs field.ErrorList, obj, old any, opts ...cel.Option) field.ErrorList {
	if s.celValidator == nil {
		return nil
	}
	if blocked, err := hasBlockingErr(errs); blocked {
		return field.ErrorList{err}
	}
	celErrs, _ := s.celValidator.Validate(ctx, nil, s.structural, obj, old, celconfig.RuntimeCELCostBudget, opts...)
	return celErrs
}

// validateResource is customResourceValidator.Validate.
func (s *crStrategy) validateResource(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	if errs := s.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	if m, merrs := objectMeta(u); len(merrs) > 0 {
		errs = append(errs, merrs...)
	} else {
		errs = append(errs, metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, m, nil, s.namespaceScoped,
			metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"), declarativeValidationBeta())...)
	}
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, s.schemaValidator)...)
	errs = append(errs, s.validateScaleSpec(u)...)
	errs = append(errs, s.validateScaleStatus(u)...)
	return errs
}

// validateResourceUpdate is customResourceValidator.ValidateUpdate.
func (s *crStrategy) validateResourceUpdate(ctx context.Context, u, old *unstructured.Unstructured, options ...apiservervalidation.ValidationOption) field.ErrorList {
	if errs := s.validateTypeMeta(u); len(errs) > 0 {
		return errs
	}
	var errs field.ErrorList
	m, merrs := objectMeta(u)
	if len(merrs) == 0 {
		var oldMeta *metav1.ObjectMeta
		if oldMeta, merrs = objectMeta(old); len(merrs) == 0 {
			errs = append(errs, metavalidation.ValidateObjectMetaDeclaratively(ctx, operation.Update, m, oldMeta, s.namespaceScoped,
				nil, field.NewPath("metadata"), declarativeValidationBeta())...)
		}
	}
	errs = append(errs, merrs...)
	errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, u.Object, old.Object, s.schemaValidator, options...)...)
	errs = append(errs, s.validateScaleSpec(u)...)
	errs = append(errs, s.validateScaleStatus(u)...)
	return errs
}

func declarativeValidationBeta() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta)
}

// validateTypeMeta is customResourceValidator.ValidateTypeMeta.
func (s *crStrategy) validateTypeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != s.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), fmt.Sprintf("must be %v", s.gvk.Kind)))
	}
	if want := s.gvk.Group + "/" + s.gvk.Version; u.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
	}
	return errs
}

// validateScaleSpec is customResourceValidator.ValidateScaleSpec (NodePool serves /scale
// on spec.replicas).
func (s *crStrategy) validateScaleSpec(u *unstructured.Unstructured) field.ErrorList {
	if s.scale == nil {
		return nil
	}
	return replicasAt(u, s.scale.SpecReplicasPath)
}

// validateScaleStatus is customResourceValidator.ValidateScaleStatus.
func (s *crStrategy) validateScaleStatus(u *unstructured.Unstructured) field.ErrorList {
	if s.scale == nil {
		return nil
	}
	errs := replicasAt(u, s.scale.StatusReplicasPath)
	if s.scale.LabelSelectorPath != nil {
		p := *s.scale.LabelSelectorPath
		selector, _, err := unstructured.NestedString(u.Object, strings.Split(strings.TrimPrefix(p, "."), ".")...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(p), selector, err.Error()))
		}
	}
	return errs
}

func replicasAt(u *unstructured.Unstructured, path string) field.ErrorList {
	replicas, _, err := unstructured.NestedInt64(u.Object, strings.Split(strings.TrimPrefix(path, "."), ".")...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, err.Error())}
	case replicas < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, "should be a non-negative integer")}
	case replicas > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// objectMeta is customresource's getObjectMeta.
func objectMeta(u *unstructured.Unstructured) (*metav1.ObjectMeta, field.ErrorList) {
	raw := u.Object["metadata"]
	if raw == nil {
		return &metav1.ObjectMeta{}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	out := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, out); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
	}
	return out, nil
}

// hasBlockingErr is customresource's: a type, required, enum, length or count error in
// the OpenAPI schema stops the CEL rules, which could not be evaluated on such a value.
func hasBlockingErr(errs field.ErrorList) (bool, *field.Error) {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return false, nil
}
