package decode

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// listOnly is a dynamic.ResourceInterface that answers List with a fixed list.
type listOnly struct {
	dynamic.ResourceInterface
	list *unstructured.UnstructuredList
}

func (l listOnly) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return l.list, nil
}

// The typed list keeps the page's resourceVersion, continue token and remaining item
// count (the informer's reflector pages with them), and each item decodes.
func TestListWatchKeepsListMeta(t *testing.T) {
	ul := &unstructured.UnstructuredList{Object: map[string]any{
		"apiVersion": "poolsmith.dev/v1alpha1", "kind": "WorkloadClassList",
		"metadata": map[string]any{"resourceVersion": "42", "continue": "next", "remainingItemCount": int64(7)},
	}}
	ul.Items = []unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "poolsmith.dev/v1alpha1", "kind": "WorkloadClass",
		"metadata": map[string]any{"name": "a"},
		"spec":     map[string]any{"baselineRef": map[string]any{"name": "prod"}},
	}}}
	for _, k := range kinds {
		if k.resource != "workloadclasses" {
			continue
		}
		obj, err := k.listWatch(listOnly{list: ul}).ListWithContextFunc(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list := obj.(*v1alpha1.WorkloadClassList)
		if list.ResourceVersion != "42" || list.Continue != "next" || list.RemainingItemCount == nil || *list.RemainingItemCount != 7 {
			t.Errorf("list metadata = %+v; want resourceVersion 42, continue next, remainingItemCount 7", list.ListMeta)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Items[0].BaselineName() != "prod" {
			t.Errorf("items = %+v", list.Items)
		}
		ul.SetRemainingItemCount(nil)
		obj, _ = k.listWatch(listOnly{list: ul}).ListWithContextFunc(context.Background(), metav1.ListOptions{})
		if n := obj.(*v1alpha1.WorkloadClassList).RemainingItemCount; n != nil {
			t.Errorf("remainingItemCount = %d; want none when the page has none", *n)
		}
		return
	}
	t.Fatal("no lenient kind for workloadclasses")
}
