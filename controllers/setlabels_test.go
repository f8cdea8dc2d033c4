package controllers

import (
	"reflect"
	"testing"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	karpv1alpha1 "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// setLabelsAndOwners does what client.Object's SetLabels and SetOwnerReferences do, for
// every kind a class writes and for an unstructured object.
func TestSetLabelsAndOwnersAsTheInterfaceDoes(t *testing.T) {
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u2"}
	for _, newObj := range []func() client.Object{
		func() client.Object { return &karpv1.NodePool{} },
		func() client.Object { return &awsv1.EC2NodeClass{} },
		func() client.Object { return &karpv1alpha1.NodeOverlay{} },
		func() client.Object { return &v1alpha1.AccessRule{} },
		func() client.Object { return &appsv1.Deployment{} },
		func() client.Object { return &corev1.PodTemplate{} },
		func() client.Object { return &cbv1beta1.CapacityBuffer{} },
		func() client.Object { return &unstructured.Unstructured{Object: map[string]any{}} },
	} {
		for _, c := range []struct {
			labels map[string]string
			refs   []metav1.OwnerReference
		}{
			{map[string]string{"a": "b", "poolsmith.dev/x": "y"}, []metav1.OwnerReference{other}},
			{map[string]string{}, []metav1.OwnerReference{}},
			{nil, nil},
		} {
			want, got := newObj(), newObj()
			for _, o := range []client.Object{want, got} {
				o.SetLabels(map[string]string{"old": "1"})
				o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "poolsmith.dev/v1alpha1", Kind: "WorkloadClass", Name: "w", UID: "u1"}})
			}
			want.SetLabels(c.labels)
			want.SetOwnerReferences(c.refs)
			setLabelsAndOwners(got, c.labels, c.refs)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%T: setLabelsAndOwners(%v, %v) left %#v; the interface leaves %#v", got, c.labels, c.refs, got, want)
			}
		}
	}
}

// setControllerReference leaves the AccessRule and returns the error that
// controllerutil.SetControllerReference would.
func TestSetControllerReferenceAsControllerutil(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	wc := &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "u1"}}
	mine := metav1.OwnerReference{APIVersion: "poolsmith.dev/v1alpha1", Kind: "WorkloadClass", Name: "w", UID: "old"}
	otherGroupVersion := metav1.OwnerReference{APIVersion: "poolsmith.dev/v1beta9", Kind: "WorkloadClass", Name: "w", UID: "u0", Controller: ptr.To(true)}
	plain := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u2"}
	rival := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "u3", Controller: ptr.To(true)}
	for name, c := range map[string]struct {
		owner *v1alpha1.WorkloadClass
		refs  []metav1.OwnerReference
		ns    string
	}{
		"none":                       {wc, nil, ""},
		"a plain owner":              {wc, []metav1.OwnerReference{plain}, ""},
		"its own, not as controller": {wc, []metav1.OwnerReference{plain, mine}, ""},
		"its own, another version":   {wc, []metav1.OwnerReference{otherGroupVersion}, ""},
		"another controller":         {wc, []metav1.OwnerReference{rival}, ""},
		"a bad apiVersion":           {wc, []metav1.OwnerReference{{APIVersion: "a/b/c", Kind: "WorkloadClass", Name: "w"}}, ""},
		"a namespaced owner":         {&v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "n"}}, nil, ""},
		"another namespace":          {&v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "n"}}, nil, "m"},
		"the same namespace":         {&v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "n"}}, nil, "n"},
		"an owner the scheme lacks":  {wc, nil, ""},
	} {
		s := scheme
		if name == "an owner the scheme lacks" {
			s = runtime.NewScheme()
		}
		rule := func() *v1alpha1.AccessRule {
			return &v1alpha1.AccessRule{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: c.ns, OwnerReferences: append([]metav1.OwnerReference(nil), c.refs...)}}
		}
		want, got := rule(), rule()
		wantErr := controllerutil.SetControllerReference(c.owner, want, s)
		gotErr := setControllerReference(c.owner, got, s)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v; controllerutil gives %+v", name, got.OwnerReferences, want.OwnerReferences)
		}
		if describe := func(err error) string {
			if err == nil {
				return ""
			}
			return reflect.TypeOf(err).String() + ": " + err.Error()
		}; describe(gotErr) != describe(wantErr) {
			t.Errorf("%s: error %q; controllerutil gives %q", name, describe(gotErr), describe(wantErr))
		}
	}
}

// addFinalizer and removeFinalizer leave a class and answer as controllerutil's
// AddFinalizer and RemoveFinalizer do.
func TestFinalizersAsControllerutil(t *testing.T) {
	for _, fs := range [][]string{nil, {}, {v1alpha1.Finalizer}, {"a"}, {"a", v1alpha1.Finalizer, "b"}, {v1alpha1.Finalizer, "a", v1alpha1.Finalizer}} {
		class := func() *v1alpha1.WorkloadClass {
			return &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "w", Finalizers: append([]string(nil), fs...)}}
		}
		if fs != nil && len(fs) == 0 {
			class = func() *v1alpha1.WorkloadClass {
				return &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "w", Finalizers: []string{}}}
			}
		}
		want, got := class(), class()
		if w, g := controllerutil.AddFinalizer(want, v1alpha1.Finalizer), addFinalizer(got, v1alpha1.Finalizer); w != g || !reflect.DeepEqual(got, want) {
			t.Errorf("add to %q: %v %q; controllerutil: %v %q", fs, g, got.Finalizers, w, want.Finalizers)
		}
		want, got = class(), class()
		if w, g := controllerutil.RemoveFinalizer(want, v1alpha1.Finalizer), removeFinalizer(got, v1alpha1.Finalizer); w != g || !reflect.DeepEqual(got, want) {
			t.Errorf("remove from %q: %v %q; controllerutil: %v %q", fs, g, got.Finalizers, w, want.Finalizers)
		}
	}
}
