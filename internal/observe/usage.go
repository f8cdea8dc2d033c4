package observe

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/headroom"
)

// PodNodeField is the field pods are listed by node with: a field selector on the API
// server, an index on the manager's pod informer.
const PodNodeField = "spec.nodeName"

// indexTimeout bounds the wait for the pod informer's first list.
const indexTimeout = 30 * time.Second

// mirrorPodAnnotation marks a static pod's mirror, which the kubelet owns.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Usage reads what a class's own pods request, the base of a percentage-sized headroom:
// the pods bound to the class's nodes (its NodeClaims' nodes) that are not terminal, not
// placeholders (pods in the headroom namespace: headroom must not feed itself), not
// DaemonSet pods and not mirror pods.
type Usage struct {
	// NodeClaims lists the class's NodeClaims (the manager's cache, or the API server).
	NodeClaims client.Reader
	// Pods lists pods by PodNodeField: the manager's trimmed pod informer (TrimPod), or
	// the API server.
	Pods client.Reader
	// Index, when set, indexes the pod informer by PodNodeField before the first list;
	// the informer is built then, so a manager where no class sizes its headroom by
	// percentage holds no pod at all. It is called until it succeeds once.
	Index func(ctx context.Context) error
	// Namespace is the headroom namespace, whose pods are placeholders.
	Namespace string

	mu      sync.Mutex
	indexed bool
}

// Requested sums the requests of class's own pods on its nodes.
func (u *Usage) Requested(ctx context.Context, class string) (corev1.ResourceList, error) {
	if err := u.index(ctx); err != nil {
		return nil, err
	}
	claims, err := Cluster{Cached: u.NodeClaims}.NodeClaims(ctx, class)
	if err != nil {
		return nil, err
	}
	total := corev1.ResourceList{}
	for _, list := range claims {
		for _, nc := range list {
			if nc.Status.NodeName == "" {
				continue
			}
			pods := &corev1.PodList{}
			if err := u.Pods.List(ctx, pods, client.MatchingFields{PodNodeField: nc.Status.NodeName}); err != nil {
				return nil, fmt.Errorf("listing pods on node %s: %w", nc.Status.NodeName, err)
			}
			for i := range pods.Items {
				if p := &pods.Items[i]; p.Namespace != u.Namespace && !daemonOrMirror(p) {
					AddRequests(total, p)
				}
			}
		}
	}
	return total, nil
}

func (u *Usage) index(ctx context.Context) error {
	if u.Index == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.indexed {
		return nil
	}
	// Building the informer waits for its first list: a manager refused it (no RBAC)
	// must not hold the class's pass forever.
	ctx, cancel := context.WithTimeout(ctx, indexTimeout)
	defer cancel()
	if err := u.Index(ctx); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	u.indexed = true
	return nil
}

// daemonOrMirror tells a DaemonSet's pod (by its controller's kind: a spoofed one only
// lowers its own class's headroom) or a static pod's mirror.
func daemonOrMirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[mirrorPodAnnotation]; ok {
		return true
	}
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "DaemonSet"
}

// AddRequests adds what p requests (containers, init containers, overhead, as the
// scheduler counts them) to total, unless p is terminal: Succeeded and Failed pods hold
// nothing.
func AddRequests(total corev1.ResourceList, p *corev1.Pod) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		sum := total[name]
		sum.Add(q)
		total[name] = sum
	}
}

// TrimPod is the manager's pod informer transform: it keeps of a pod only what Usage
// reads (namespace and name, the mirror annotation, the controller's kind, the node, the
// phase and the requests), so the cache holds about 200 bytes a pod instead of several
// kilobytes. Nothing else in the manager reads pods from the cache: the cost and
// rebalance controllers list them from the API server.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	if v, ok := p.Annotations[mirrorPodAnnotation]; ok {
		out.Annotations = map[string]string{mirrorPodAnnotation: v}
	}
	if owner := metav1.GetControllerOf(p); owner != nil {
		out.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: owner.Controller}}
	}
	out.Spec.NodeName, out.Spec.Overhead, out.Spec.Resources = p.Spec.NodeName, p.Spec.Overhead, p.Spec.Resources
	out.Spec.Containers = trimContainers(p.Spec.Containers)
	out.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	out.Status.Phase = p.Status.Phase
	return out, nil
}

// trimContainers keeps each container's name, requests and restart policy (which makes an
// init container a sidecar, counted for the pod's whole life).
func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
	}
	return out
}

// WarmNodes counts the nodes of claims (a rung's NodeClaims) that the headroom keeps up:
// nodes running at least one placeholder (a pod in namespace, the headroom namespace) and
// no other pod but DaemonSet and mirror pods. Pods are read from Direct, one list per
// node, as Cost reads them.
func (c Cluster) WarmNodes(ctx context.Context, claims []*karpv1.NodeClaim, namespace string) (int32, error) {
	warm := int32(0)
	for _, nc := range claims {
		if nc.Status.NodeName == "" {
			continue
		}
		pods := &corev1.PodList{}
		if err := c.Direct.List(ctx, pods, client.MatchingFields{PodNodeField: nc.Status.NodeName}); err != nil {
			return 0, fmt.Errorf("listing pods on node %s: %w", nc.Status.NodeName, err)
		}
		placeholders, others := 0, 0
		for i := range pods.Items {
			switch p := &pods.Items[i]; {
			case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || daemonOrMirror(p):
			case p.Namespace == namespace:
				placeholders++
			default:
				others++
			}
		}
		if placeholders > 0 && others == 0 {
			warm++
		}
	}
	return warm, nil
}

// NodeRooms reads, for a CapacityBuffer's warm nodes (headroom.BufferWarmth), each node of
// claims (a rung's NodeClaims) that is registered and not being deleted: the room left of
// its NodeClaim's status.allocatable (what Karpenter reports of the node) by the requests
// of every pod on it that is not terminal, DaemonSet and mirror pods included, and whether
// it runs no pod but those. Pods are read from Direct, one list per node, as WarmNodes
// reads them.
func (c Cluster) NodeRooms(ctx context.Context, claims []*karpv1.NodeClaim) ([]headroom.NodeRoom, error) {
	var out []headroom.NodeRoom
	for _, nc := range claims {
		if nc.Status.NodeName == "" || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		pods := &corev1.PodList{}
		if err := c.Direct.List(ctx, pods, client.MatchingFields{PodNodeField: nc.Status.NodeName}); err != nil {
			return nil, fmt.Errorf("listing pods on node %s: %w", nc.Status.NodeName, err)
		}
		used, empty := corev1.ResourceList{}, true
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			AddRequests(used, p)
			if !daemonOrMirror(p) {
				empty = false
			}
		}
		room := corev1.ResourceList{}
		for name, q := range nc.Status.Allocatable {
			room[name] = q.DeepCopy()
		}
		for name, q := range used {
			left := room[name]
			left.Sub(q)
			room[name] = left
		}
		out = append(out, headroom.NodeRoom{Room: room, Empty: empty})
	}
	return out, nil
}
