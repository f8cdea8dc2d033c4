package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/cost"
)

// Cost gathers what internal/cost prices a class from: its NodePools and NodeClaims
// (Cached), and what the pods on each launched node request, listed by node from Direct
// (pods are not cached, so the manager's memory does not grow with them): one list per
// node of the class.
func (c Cluster) Cost(ctx context.Context, wc *v1alpha1.WorkloadClass, cat *catalog.Catalog, region string) (cost.Input, error) {
	pools := &karpv1.NodePoolList{}
	if err := c.Cached.List(ctx, pools, c.ofClass(wc.Name, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: wc.Name})...); err != nil {
		return cost.Input{}, fmt.Errorf("listing NodePools of WorkloadClass %s: %w", wc.Name, err)
	}
	claims, err := c.NodeClaims(ctx, wc.Name)
	if err != nil {
		return cost.Input{}, err
	}
	in := c.Coverage.CostInput(costInput(controlledBy(pools.Items, wc), claims, cat, region))
	for i, n := range in.Nodes {
		if n.InstanceType != "" && n.NodeName != "" {
			if in.Nodes[i].Requested, err = c.requested(ctx, n.NodeName); err != nil {
				return in, err
			}
		}
	}
	return in, nil
}

// costInput is what the cost is computed from, of the class's NodePools and NodeClaims
// (pod requests are the caller's to add).
func costInput(pools map[string]*karpv1.NodePool, claims map[string][]*karpv1.NodeClaim, cat *catalog.Catalog, region string) cost.Input {
	in := cost.Input{Catalog: cat, Region: region}
	for _, np := range pools {
		weight := int32(0)
		if np.Spec.Weight != nil {
			weight = *np.Spec.Weight
		}
		in.Rungs = append(in.Rungs, cost.Rung{Name: np.Name, Weight: weight, Requirements: np.Spec.Template.Spec.Requirements,
			Retiring: metav1.HasAnnotation(np.ObjectMeta, v1alpha1.AnnotationRetired) || !np.DeletionTimestamp.IsZero()})
	}
	for _, list := range claims {
		for _, nc := range list {
			in.Nodes = append(in.Nodes, cost.Node{NodeClaim: nc.Name, Rung: nc.Labels[karpv1.NodePoolLabelKey], InstanceType: nc.Labels[corev1.LabelInstanceTypeStable],
				Zone: nc.Labels[corev1.LabelTopologyZone], CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey], NodeName: nc.Status.NodeName,
				Allocatable: nc.Status.Allocatable})
		}
	}
	return in
}

// requested sums the requests of the pods running on a node (Succeeded and Failed pods
// hold nothing).
func (c Cluster) requested(ctx context.Context, node string) (corev1.ResourceList, error) {
	pods := &corev1.PodList{}
	if err := c.Direct.List(ctx, pods, client.MatchingFields{PodNodeField: node}); err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	total := corev1.ResourceList{}
	for i := range pods.Items {
		AddRequests(total, &pods.Items[i])
	}
	return total, nil
}
