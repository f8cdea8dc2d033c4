package operator_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	cbv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	"sigs.k8s.io/karpenter/pkg/controllers/capacitybuffer"
	"sigs.k8s.io/karpenter/pkg/state/virtualpods"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
	"github.com/poolsmith/poolsmith/internal/harness/testenv"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/scheme"
)

// noProvisioner stands in for Karpenter's provisioner, which the buffer controller wakes
// after each pass: the probe reads only the buffer controller's condition.
type noProvisioner struct{}

func (noProvisioner) Trigger(types.UID) {}
func (noProvisioner) TriggerReconcile() {}

// TestHeadroomAuto runs --headroom=auto's choice against a real API server, which serves
// the CapacityBuffer CRD (testenv installs Karpenter's CRDs): without Karpenter the probe
// buffer stays unresolved and the manager holds placeholder pods, saying why; with
// Karpenter v1.15.0's own CapacityBuffer controller running (what its feature gate
// starts), the probe is resolved and the manager holds CapacityBuffers. Either way the
// probe is deleted. --headroom=capacitybuffer is taken at its word, and pods stays pods.
func TestHeadroomAuto(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	c := env.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultHeadroomNamespace}}))
	probesLeft := func() int {
		t.Helper()
		list := &cbv1beta1.CapacityBufferList{}
		must(t, c.List(ctx, list, client.InNamespace(v1alpha1.DefaultHeadroomNamespace), client.HasLabels{operator.LabelHeadroomProbe}))
		return len(list.Items)
	}
	// The manager's Pod, as the downward API names it: auto's choice is an event on it.
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "poolsmith-system"}}))
	pod := operator.PodRef{Namespace: "poolsmith-system", Name: "poolsmith-7d9f8-abcde", UID: "6f1c2d3e-0000-4000-8000-000000000001"}
	choices := func() []string {
		t.Helper()
		list := &eventsv1.EventList{}
		must(t, c.List(ctx, list, client.InNamespace(pod.Namespace)))
		var notes []string
		for _, ev := range list.Items {
			if ev.Reason == operator.EventHeadroomMechanism && ev.Regarding.Kind == "Pod" && ev.Regarding.Name == pod.Name && ev.Regarding.UID == pod.UID {
				notes = append(notes, ev.Note)
			}
		}
		sort.Strings(notes)
		return notes
	}
	resolve := func(mode v1alpha1.HeadroomMechanism) capabilities.Capabilities {
		t.Helper()
		caps := capabilities.Capabilities{Headroom: mode}
		must(t, operator.ResolveHeadroom(ctx, env.Config, &caps, 3*time.Second, pod))
		if !caps.HeadroomBuffers {
			t.Errorf("%s: discovery did not find CapacityBuffers served", mode)
		}
		return caps
	}

	caps := resolve(v1alpha1.HeadroomAuto)
	if caps.Headroom != v1alpha1.HeadroomPods || !strings.Contains(caps.HeadroomReason, "Karpenter did not resolve the probe CapacityBuffer poolsmith-headroom/poolsmith-probe-") {
		t.Errorf("auto without Karpenter: %s (%s), want Pods saying the probe was not resolved", caps.Headroom, caps.HeadroomReason)
	}
	if n := probesLeft(); n != 0 {
		t.Errorf("%d probe buffers left", n)
	}
	if got := choices(); len(got) != 1 || !strings.HasPrefix(got[0], "headroom mechanism Pods: --headroom=auto: Karpenter did not resolve the probe CapacityBuffer") {
		t.Errorf("events on the manager's Pod after auto without Karpenter: %q, want one saying Pods and why", got)
	}
	if caps := resolve(v1alpha1.HeadroomCapacityBuffer); caps.Headroom != v1alpha1.HeadroomCapacityBuffer {
		t.Errorf("capacitybuffer: %s", caps.Headroom)
	}
	if caps := resolve(v1alpha1.HeadroomPods); caps.Headroom != v1alpha1.HeadroomPods || caps.HeadroomReason != "the manager runs with --headroom=pods" {
		t.Errorf("pods: %s (%s)", caps.Headroom, caps.HeadroomReason)
	}

	// Karpenter's buffer controller, as its CapacityBuffer gate starts it.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptrTo(true)}})
	if err != nil {
		t.Fatal(err)
	}
	must(t, capacitybuffer.NewController(mgr.GetClient(), noProvisioner{}, virtualpods.NewVirtualPodCache(mgr.GetClient())).Register(ctx, mgr))
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	caps = resolve(v1alpha1.HeadroomAuto)
	if caps.Headroom != v1alpha1.HeadroomCapacityBuffer || !strings.Contains(caps.HeadroomReason, "Karpenter resolved the probe CapacityBuffer in") {
		t.Errorf("auto with Karpenter's buffer controller: %s (%s), want CapacityBuffer", caps.Headroom, caps.HeadroomReason)
	}
	if n := probesLeft(); n != 0 {
		t.Errorf("%d probe buffers left", n)
	}
	// One event per auto: the explicit flags record none.
	if got := choices(); len(got) != 2 || !strings.HasPrefix(got[0], "headroom mechanism CapacityBuffer: --headroom=auto: Karpenter resolved the probe CapacityBuffer in") {
		t.Errorf("events on the manager's Pod after auto with Karpenter's buffer controller: %q, want a second saying CapacityBuffer", got)
	}
}

func ptrTo[T any](v T) *T { return &v }
