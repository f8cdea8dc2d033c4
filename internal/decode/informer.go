package decode

import (
	"context"
	"net/http"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// NewInformerFunc is the shape of controller-runtime's cache.Options.NewInformer.
type NewInformerFunc func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// kinds are the kinds read through Into: their resource and how to make their objects.
var kinds = map[reflect.Type]lenientKind{}

type lenientKind struct {
	resource string
	newObj   func() client.Object
	// newList is an empty list with the given list metadata, set through the concrete
	// type: calling SetRemainingItemCount through metav1.ListInterface kept that method
	// of every list type in the binary alive (nothing else calls it; 174 wrappers).
	newList func(metav1.ListMeta) runtime.Object
}

func init() {
	kinds[reflect.TypeFor[*v1alpha1.WorkloadClass]()] = lenientKind{"workloadclasses",
		func() client.Object { return &v1alpha1.WorkloadClass{} }, func(lm metav1.ListMeta) runtime.Object { return &v1alpha1.WorkloadClassList{ListMeta: lm} }}
	kinds[reflect.TypeFor[*v1alpha1.Baseline]()] = lenientKind{"baselines",
		func() client.Object { return &v1alpha1.Baseline{} }, func(lm metav1.ListMeta) runtime.Object { return &v1alpha1.BaselineList{ListMeta: lm} }}
}

// NewInformer returns a cache.Options.NewInformer that lists and watches WorkloadClasses
// and Baselines through the dynamic client and decodes each item with Into, and builds
// every other informer as controller-runtime would. The cache applies no selector to these
// two kinds (internal/operator sets none), so the ListerWatcher it passes is not needed.
func NewInformer(cfg *rest.Config, httpClient *http.Client) (NewInformerFunc, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = nil // the dynamic client sets its own
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if k, ok := kinds[reflect.TypeOf(obj)]; ok {
			lw = k.listWatch(dyn.Resource(v1alpha1.GroupVersion.WithResource(k.resource)))
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}, nil
}

func (k lenientKind) listWatch(res dynamic.ResourceInterface) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			ul, err := res.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			list := k.newList(metav1.ListMeta{
				ResourceVersion:    ul.GetResourceVersion(),
				Continue:           ul.GetContinue(),
				RemainingItemCount: ul.GetRemainingItemCount(),
			})
			items := make([]runtime.Object, 0, len(ul.Items))
			for i := range ul.Items {
				if obj := k.decode(ctx, &ul.Items[i]); obj != nil {
					items = append(items, obj)
				}
			}
			return list, meta.SetList(list, items)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := res.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				u, ok := e.Object.(*unstructured.Unstructured)
				if !ok || e.Type == watch.Error {
					return e, true
				}
				obj := k.decode(ctx, u)
				if obj == nil {
					return e, false
				}
				e.Object = obj
				return e, true
			}), nil
		},
	}
}

// decode is u as its Go type, or nil when not even its metadata decodes: such an object
// has no name to report on, so it is logged and left out.
func (k lenientKind) decode(ctx context.Context, u *unstructured.Unstructured) client.Object {
	obj := k.newObj()
	if err := Unstructured(u, obj); err != nil {
		logf.FromContext(ctx).Error(err, "leaving out an object whose metadata does not decode", "resource", k.resource, "name", u.GetName())
		return nil
	}
	return obj
}
