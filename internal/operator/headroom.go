package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/observe"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// DefaultHeadroomProbeTimeout is how long --headroom=auto waits for Karpenter to resolve
// its probe CapacityBuffer: Karpenter's buffer controller does so within seconds of a
// create, and again every 30 s.
const DefaultHeadroomProbeTimeout = 60 * time.Second

// LabelHeadroomProbe marks the probe CapacityBuffers of --headroom=auto.
const LabelHeadroomProbe = "poolsmith.dev/headroom-probe"

// EventHeadroomMechanism is the reason of the event --headroom=auto records on the
// manager's Pod: which mechanism its probe chose, and why.
const EventHeadroomMechanism = "HeadroomMechanism"

// PodRef names the manager's own Pod, which start-up decisions are recorded on.
type PodRef struct {
	Namespace, Name string
	UID             types.UID
}

// ResolveHeadroom settles the manager's headroom mechanism before the cache is built.
// Discovery says whether the cluster serves CapacityBuffers (then they and their
// PodTemplates are cached, watched and pruned whatever the mechanism). capacitybuffer
// needs them served and takes the operator at its word that Karpenter's CapacityBuffer
// feature gate is on; auto uses them only when the probe shows Karpenter's buffer
// controller running (the CRD is installed with Karpenter whether or not the gate is on),
// and placeholder pods otherwise. caps.HeadroomReason says which and why, in the log and,
// for auto, in an event on pod (recordHeadroomChoice).
func ResolveHeadroom(ctx context.Context, cfg *rest.Config, caps *capabilities.Capabilities, timeout time.Duration, pod PodRef) error {
	if !caps.HeadroomOn() {
		return nil
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("creating a REST mapper: %w", err)
	}
	served, err := observe.ServesCapacityBuffers(mapper)
	if err != nil {
		return err
	}
	caps.HeadroomBuffers = served
	log := ctrl.Log.WithName("headroom")
	const notServed = "the cluster does not serve autoscaling.x-k8s.io/v1beta1 CapacityBuffers"
	switch caps.Headroom {
	case v1alpha1.HeadroomCapacityBuffer:
		if !served {
			return fmt.Errorf("--headroom=capacitybuffer: %s (install Karpenter's CapacityBuffer CRD and turn its CapacityBuffer feature gate on, or use --headroom=auto or pods)", notServed)
		}
		caps.HeadroomReason = "the manager runs with --headroom=capacitybuffer"
	case v1alpha1.HeadroomAuto:
		caps.Headroom = v1alpha1.HeadroomPods
		if !served {
			caps.HeadroomReason = "--headroom=auto: " + notServed
			break
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme, HTTPClient: httpClient, Mapper: mapper})
		if err != nil {
			return err
		}
		took, err := ProbeCapacityBuffer(ctx, c, caps.HeadroomNamespaceOrDefault(), timeout)
		if err != nil {
			caps.HeadroomReason = "--headroom=auto: " + err.Error()
		} else {
			caps.Headroom = v1alpha1.HeadroomCapacityBuffer
			caps.HeadroomReason = fmt.Sprintf("--headroom=auto: Karpenter resolved the probe CapacityBuffer in %s", took.Round(100*time.Millisecond))
		}
		recordHeadroomChoice(ctx, c, pod, caps)
	default:
		caps.HeadroomReason = "the manager runs with --headroom=pods"
	}
	log.Info("headroom mechanism", "mechanism", caps.Headroom, "why", caps.HeadroomReason, "capacityBuffersServed", served)
	return nil
}

// ProbeCapacityBuffer tells whether Karpenter's CapacityBuffer controller runs: it creates
// a CapacityBuffer of 0 replicas in namespace, whose podTemplateRef names no PodTemplate,
// and waits for its ReadyForProvisioning condition, which only Karpenter's buffer
// controller writes (False, PodTemplateNotFound, here). 0 replicas make no virtual pod, so
// the probe launches nothing. The probe is deleted before it returns, and probes older than
// 10 minutes (left by a manager killed while probing) first. Each replica probes with a
// name of its own. It returns how long Karpenter took, or why the probe failed.
func ProbeCapacityBuffer(ctx context.Context, c client.Client, namespace string, timeout time.Duration) (time.Duration, error) {
	old := &cbv1beta1.CapacityBufferList{}
	if err := c.List(ctx, old, client.InNamespace(namespace), client.HasLabels{LabelHeadroomProbe}); err == nil {
		for i := range old.Items {
			if time.Since(old.Items[i].CreationTimestamp.Time) > 10*time.Minute {
				_ = c.Delete(ctx, &old.Items[i])
			}
		}
	}
	probe := &cbv1beta1.CapacityBuffer{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "poolsmith-probe-", Namespace: namespace, Labels: map[string]string{LabelHeadroomProbe: "true"}},
		Spec: cbv1beta1.CapacityBufferSpec{
			PodTemplateRef: &cbv1beta1.LocalObjectRef{Name: "poolsmith-probe-has-no-template"},
			Replicas:       ptr.To[int32](0),
		},
	}
	start := time.Now()
	if err := c.Create(ctx, probe); err != nil {
		return 0, fmt.Errorf("creating a probe CapacityBuffer in namespace %s: %w", namespace, err)
	}
	defer func() {
		// The caller's context may be done; the probe must go all the same.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := c.Delete(dctx, probe); err != nil && !apierrors.IsNotFound(err) {
			ctrl.Log.WithName("headroom").Error(err, "deleting the probe CapacityBuffer", "namespace", namespace, "name", probe.Name)
		}
	}()
	deadline := time.Now().Add(timeout)
	for {
		got := &cbv1beta1.CapacityBuffer{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(probe), got); err != nil {
			return 0, fmt.Errorf("reading the probe CapacityBuffer %s/%s: %w", namespace, probe.Name, err)
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, cbv1beta1.ReadyForProvisioningCondition); cond != nil && cond.ObservedGeneration == got.Generation {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("Karpenter did not resolve the probe CapacityBuffer %s/%s within %s, so its CapacityBuffer feature gate is taken to be off", namespace, probe.Name, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, errors.Join(errors.New("probing for Karpenter's CapacityBuffer controller"), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// recordHeadroomChoice records auto's choice as an event on the manager's Pod, where
// `kubectl describe pod` and the release namespace's events show it beside the pod's own.
// The Pod, not a headroom object: the probe is deleted at once, and an event on the
// headroom namespace (cluster-scoped) would land in namespace default. It is written here,
// with the probe's client, because the manager's recorder writes through the leader
// fence, which holds every replica's writes until it leads, and each replica probes for
// itself. A refused event is logged and changes nothing.
func recordHeadroomChoice(ctx context.Context, c client.Client, pod PodRef, caps *capabilities.Capabilities) {
	if pod.Name == "" || pod.Namespace == "" {
		return
	}
	note := fmt.Sprintf("headroom mechanism %s: %s", caps.Headroom, caps.HeadroomReason)
	if len(note) > 1024 {
		note = note[:1024]
	}
	now := time.Now()
	ev := &eventsv1.Event{
		// Named as client-go's recorder names events.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: "poolsmith",
		ReportingInstance:   pod.Name,
		Action:              "Probe",
		Reason:              EventHeadroomMechanism,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Note:                note,
		Type:                corev1.EventTypeNormal,
	}
	if err := c.Create(ctx, ev); err != nil {
		ctrl.Log.WithName("headroom").Error(err, "recording the headroom mechanism as an event", "pod", pod.Namespace+"/"+pod.Name)
	}
}
