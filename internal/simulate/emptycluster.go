package simulate

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// emptyCluster is the client Karpenter's scheduler reads the cluster through during a
// simulation: a cluster with no objects at all. Every Get is NotFound and every List
// empty, as from controller-runtime's fake client with nothing in it; it replaces that
// fake, whose package links the apply configurations of every built-in API group (a few
// megabytes of the binary teams download for the offline commands). The scheduler only
// reads; a write is refused.
type emptyCluster struct {
	scheme *runtime.Scheme
}

var errReadOnly = errors.New("the simulated cluster is read-only")

var _ client.Client = emptyCluster{}

func (c emptyCluster) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return apierrors.NewNotFound(gvr.GroupResource(), key.Name)
}

func (c emptyCluster) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if err := meta.SetList(list, nil); err != nil {
		return fmt.Errorf("emptying %T: %w", list, err)
	}
	return nil
}

func (emptyCluster) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errReadOnly
}
func (emptyCluster) Create(context.Context, client.Object, ...client.CreateOption) error {
	return errReadOnly
}
func (emptyCluster) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return errReadOnly
}
func (emptyCluster) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errReadOnly
}
func (emptyCluster) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errReadOnly
}
func (emptyCluster) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errReadOnly
}
func (emptyCluster) Status() client.SubResourceWriter            { return noSubResource{} }
func (emptyCluster) SubResource(string) client.SubResourceClient { return noSubResource{} }
func (c emptyCluster) Scheme() *runtime.Scheme                   { return c.scheme }
func (emptyCluster) RESTMapper() meta.RESTMapper                 { return nil }

func (c emptyCluster) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, c.scheme)
}

func (emptyCluster) IsObjectNamespaced(runtime.Object) (bool, error) {
	return false, errors.New("the simulated cluster has no REST mapping")
}

// noSubResource is every subresource of the empty cluster: nothing to read, no writes.
type noSubResource struct{}

func (noSubResource) Get(_ context.Context, obj client.Object, _ client.Object, _ ...client.SubResourceGetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, obj.GetName())
}
func (noSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errReadOnly
}
func (noSubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errReadOnly
}
func (noSubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errReadOnly
}
func (noSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errReadOnly
}
