package simulate

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/karpenter/pkg/utils/daemonset"

	"github.com/poolsmith/poolsmith/internal/manifest"
)

// MaxPods bounds a simulation: at most this many pending pods per workload (replicas, or
// a Job's parallelism) and in total. Karpenter's scheduler holds every pod and NodeClaim
// in memory: two billion replicas once grew the process past 9 GB.
const MaxPods = 10000

// WorkloadKinds are the kinds Pods and DaemonSetPods read.
var WorkloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "Job": true, "Pod": true, "DaemonSet": true}

// DaemonSetPods are the DaemonSets' pods as Karpenter's provisioner sees them before any
// runs (daemonset.PodForDaemonSet: the template's spec, limits merged into requests where
// requests are unset). Karpenter adds the requests of every one that would run on a
// NodeClaim (its nodeSelector, required affinity and tolerations admit the NodeClaim) to
// the NodeClaim's pods when it picks instance types: the overhead that decides which fit.
func DaemonSetPods(objs []manifest.Object) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		d := &appsv1.DaemonSet{}
		if err := o.Into(d); err != nil {
			return nil, err
		}
		if d.Namespace == "" {
			d.Namespace = "default"
		}
		pod := daemonset.PodForDaemonSet(d)
		pod.UID = types.UID(fmt.Sprintf("DaemonSet/%s/%s", d.Namespace, d.Name))
		pod.Labels = d.Spec.Template.Labels
		pods = append(pods, pod)
	}
	return pods, nil
}

// Pods expands Deployments, StatefulSets, Jobs and Pods into the pending pods Karpenter
// would see: replicas (Jobs: parallelism) copies of the template with its requests,
// nodeSelector, affinity, tolerations and topologySpreadConstraints. Other kinds
// (DaemonSets among them: see DaemonSetPods) are skipped. Negative counts and counts over MaxPods are errors naming the object and field.
func Pods(objs []manifest.Object) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	for _, o := range objs {
		var (
			template corev1.PodTemplateSpec
			replicas int32 = 1
			field          = "spec.replicas"
		)
		switch o.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := o.Into(d); err != nil {
				return nil, err
			}
			template, replicas = d.Spec.Template, deref(d.Spec.Replicas, 1)
		case "StatefulSet":
			s := &appsv1.StatefulSet{}
			if err := o.Into(s); err != nil {
				return nil, err
			}
			template, replicas = s.Spec.Template, deref(s.Spec.Replicas, 1)
		case "Job":
			j := &batchv1.Job{}
			if err := o.Into(j); err != nil {
				return nil, err
			}
			template, replicas, field = j.Spec.Template, deref(j.Spec.Parallelism, 1), "spec.parallelism"
		case "Pod":
			p := &corev1.Pod{}
			if err := o.Into(p); err != nil {
				return nil, err
			}
			template = corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
		default:
			continue
		}
		switch {
		case replicas < 0:
			return nil, fmt.Errorf("%s: %s: %d must not be negative", o.Where(), field, replicas)
		case replicas > MaxPods:
			return nil, fmt.Errorf("%s: %s: %d is more than the %d pods a simulation takes", o.Where(), field, replicas, MaxPods)
		case len(pods)+int(replicas) > MaxPods:
			return nil, fmt.Errorf("%s: %s: %d more pods make more than the %d pods a simulation takes", o.Where(), field, replicas, MaxPods)
		}
		ns := o.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		for i := range replicas {
			name := o.GetName()
			if o.GetKind() != "Pod" {
				name = fmt.Sprintf("%s-%d", o.GetName(), i)
			}
			pod := &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: ns, Labels: template.Labels, Annotations: template.Annotations,
					UID: types.UID(fmt.Sprintf("%s/%s/%s", o.GetKind(), ns, name)),
				},
				Spec:   *template.Spec.DeepCopy(),
				Status: corev1.PodStatus{Phase: corev1.PodPending},
			}
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
