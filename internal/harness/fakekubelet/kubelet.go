package fakekubelet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Annotation marks the nodes this kubelet registered.
const Annotation = "poolsmith.dev/simulated-node"

// KubeletVersion is what the registered nodes report.
const KubeletVersion = "v1.37.2"

// Kubelet registers and runs the nodes of launched NodeClaims.
type Kubelet struct {
	Client client.Client
	// Interval between passes; 500ms when zero.
	Interval time.Duration
	Log      logr.Logger
}

// Run makes a pass every Interval until ctx is done.
func (k *Kubelet) Run(ctx context.Context) {
	interval := k.Interval
	if interval == 0 {
		interval = 500 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := k.Sync(ctx); err != nil && ctx.Err() == nil {
			k.Log.Info("kubelet stand-in pass failed; retrying", "error", err.Error())
		}
	}
}

// Sync makes one pass: register nodes, make them ready, run and finish pods.
func (k *Kubelet) Sync(ctx context.Context) error {
	claims := &karpv1.NodeClaimList{}
	if err := k.Client.List(ctx, claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := k.Client.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing Nodes: %w", err)
	}
	byProviderID := map[string]bool{}
	ours := map[string]bool{}
	for _, n := range nodes.Items {
		byProviderID[n.Spec.ProviderID] = true
		if n.Annotations[Annotation] == "true" {
			ours[n.Name] = true
		}
	}
	var errs []error
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID == "" || !nc.DeletionTimestamp.IsZero() || byProviderID[nc.Status.ProviderID] {
			continue
		}
		name, err := k.register(ctx, nc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ours[name] = true
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !ours[n.Name] || !n.DeletionTimestamp.IsZero() {
			continue
		}
		// A node whose first status report lost a race (Karpenter labels a new node at
		// once) is reported again, or it would stay NotReady with its pods unrun.
		if !isReady(n) {
			errs = append(errs, k.reportReady(ctx, n, claimOf(n, claims.Items)))
			continue
		}
		errs = append(errs, k.untaint(ctx, n, claims.Items))
	}
	errs = append(errs, k.runPods(ctx, ours, nodes.Items))
	return errors.Join(errs...)
}

// register creates the Node a kubelet would register for nc and reports it Ready.
func (k *Kubelet) register(ctx context.Context, nc *karpv1.NodeClaim) (string, error) {
	id := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
	name := "ip-" + strings.ToLower(id) + ".ec2.internal"
	labels := map[string]string{}
	for key, value := range nc.Labels {
		labels[key] = value
	}
	labels[corev1.LabelHostname] = name
	taints := []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}
	taints = append(taints, nc.Spec.Taints...)
	taints = append(taints, nc.Spec.StartupTaints...)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{Annotation: "true"}},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: taints},
	}
	if err := k.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("registering Node %s for NodeClaim %s: %w", name, nc.Name, err)
	}
	k.Log.V(1).Info("registered node", "node", name, "nodeclaim", nc.Name, "instance-type", nc.Labels[corev1.LabelInstanceTypeStable])
	if err := k.reportReady(ctx, node, nc); err != nil {
		return name, err
	}
	return name, nil
}

// reportReady posts the node's status as a kubelet does once it runs: capacity and
// allocatable from its NodeClaim, Ready. A conflict is left to the next pass, which finds
// the node not Ready and reports again.
func (k *Kubelet) reportReady(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim) error {
	if nc == nil {
		return nil
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity:    nc.Status.Capacity,
		Allocatable: nc.Status.Allocatable,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet stand-in is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}},
		NodeInfo:  corev1.NodeSystemInfo{Architecture: node.Labels[corev1.LabelArchStable], OperatingSystem: "linux", KubeletVersion: KubeletVersion},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: node.Name}},
	}
	if err := k.Client.Status().Update(ctx, node); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reporting Node %s Ready: %w", node.Name, err)
	}
	return nil
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// claimOf is the NodeClaim the node was registered for.
func claimOf(n *corev1.Node, claims []karpv1.NodeClaim) *karpv1.NodeClaim {
	for i := range claims {
		if claims[i].Status.ProviderID != "" && claims[i].Status.ProviderID == n.Spec.ProviderID {
			return &claims[i]
		}
	}
	return nil
}

// untaint removes the not-ready taint from a Ready node and, once Karpenter has
// registered it, the NodeClaim's startup taints.
func (k *Kubelet) untaint(ctx context.Context, n *corev1.Node, claims []karpv1.NodeClaim) error {
	if !isReady(n) {
		return nil
	}
	startup := map[string]bool{}
	if n.Labels[karpv1.NodeRegisteredLabelKey] == "true" {
		for _, nc := range claims {
			if nc.Status.ProviderID == n.Spec.ProviderID {
				for _, t := range nc.Spec.StartupTaints {
					startup[t.Key+"/"+string(t.Effect)] = true
				}
			}
		}
	}
	var keep []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady && !startup[t.Key+"/"+string(t.Effect)] {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(n.Spec.Taints) {
		return nil
	}
	patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
	n.Spec.Taints = keep
	if err := k.Client.Patch(ctx, n, patch); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("removing not-ready and startup taints from Node %s: %w", n.Name, err)
	}
	return nil
}

// runPods starts pods bound to this kubelet's nodes and finishes those terminating on
// them or left on nodes that are gone.
func (k *Kubelet) runPods(ctx context.Context, ours map[string]bool, nodes []corev1.Node) error {
	exists := map[string]bool{}
	byName := map[string]*corev1.Node{}
	for i, n := range nodes {
		exists[n.Name] = true
		byName[n.Name] = &nodes[i]
	}
	pods := &corev1.PodList{}
	if err := k.Client.List(ctx, pods); err != nil {
		return fmt.Errorf("listing Pods: %w", err)
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || exists[p.Spec.NodeName] && !ours[p.Spec.NodeName] {
			continue
		}
		if !p.DeletionTimestamp.IsZero() || !exists[p.Spec.NodeName] {
			if err := k.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("finishing Pod %s/%s: %w", p.Namespace, p.Name, err))
			}
			continue
		}
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		if reason, message, ok := Admit(p, byName[p.Spec.NodeName]); !ok {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, reason, "Pod was rejected: "+message
			if err := k.Client.Status().Update(ctx, p); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("reporting Pod %s/%s rejected: %w", p.Namespace, p.Name, err))
			}
			k.Log.V(1).Info("rejected pod", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "reason", reason)
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setPodCondition(p, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		if err := k.Client.Status().Update(ctx, p); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("reporting Pod %s/%s Running: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func setPodCondition(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// Reasons and messages of the kubelet's admission refusals this stand-in makes
// (k8s.io/kubernetes pkg/kubelet/lifecycle/predicate.go: the predicate's name, and
// "Predicate <name> failed: " before the scheduler plugin's ErrReason*). The kubelet reports
// the pod Failed with the reason and "Pod was rejected: " before the message.
const (
	ReasonNodeAffinity     = "NodeAffinity"
	MessageNodeAffinity    = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	ReasonTaintToleration  = "TaintToleration"
	MessageTaintToleration = "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
)

// Admit is the part of the kubelet's pod admission this stand-in enforces, in the
// kubelet's order (the first failure is the one reported): the pod's nodeSelector and
// required node affinity must match the node's labels (and a DaemonSet pod's
// metadata.name field), and the pod must tolerate every NoExecute taint of the node,
// whether the scheduler placed it or it named the node itself (spec.nodeName).
// NoSchedule taints are the scheduler's and are not checked; neither are resources or
// host ports. Toleration comparison operators (Lt, Gt) are off, as the
// TaintTolerationComparisonOperators gate is by default in 1.37. Static pods, which the
// kubelet does not check, never come from the API server, so every pod here is checked.
func Admit(pod *corev1.Pod, node *corev1.Node) (reason, message string, ok bool) {
	if node == nil {
		return "", "", true
	}
	if match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !match {
		return ReasonNodeAffinity, MessageNodeAffinity, false
	}
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(logr.Discard(), taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return ReasonTaintToleration, MessageTaintToleration, false
		}
	}
	return "", "", true
}
