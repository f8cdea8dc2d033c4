package controllers

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/cost"
	"github.com/poolsmith/poolsmith/internal/headroom"
	"github.com/poolsmith/poolsmith/internal/plan"
	"github.com/poolsmith/poolsmith/internal/render"
)

var (
	headroomDesired = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_headroom_desired_units",
		Help: "Units of headroom each WorkloadClass asks for (status.headroom.desired).",
	}, []string{"class", "mechanism"})
	headroomReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_headroom_ready_units",
		Help: "Units of headroom placed on running nodes (status.headroom.ready).",
	}, []string{"class", "mechanism"})
	headroomIdleCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_headroom_idle_cost_per_hour",
		Help: "Estimated USD per hour the idle units of headroom cost (status.headroom.idleCostPerHour).",
	}, []string{"class", "mechanism"})
	headroomWarmNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "poolsmith_headroom_warm_nodes",
		Help: "Nodes of the headroom's rung its ready units keep warm (status.headroom.warmNodes): running placeholders and no other pod but DaemonSet pods (Pods), or no pod but DaemonSet pods, as many as the CapacityBuffer's units need (CapacityBuffer).",
	}, []string{"class", "mechanism"})
	headroomGauges = []*prometheus.GaugeVec{headroomDesired, headroomReady, headroomIdleCost, headroomWarmNodes}
)

func init() {
	metrics.Registry.MustRegister(headroomDesired, headroomReady, headroomIdleCost, headroomWarmNodes)
}

// headroomFigures adds to st (status.headroom) the nodes the headroom keeps warm and what
// its idle units cost per hour, the unit priced by render on the rung as every node is
// (cost.PerUnit), and records the headroom's gauges. Pods are listed only while some unit
// is ready: otherwise no unit is placed, and no node is warm. Placeholder pods are seen, so
// every ready unit is idle; a CapacityBuffer's virtual pods are not, so its warm nodes and
// idle units are read from the room on the rung's nodes (headroom.BufferWarmth).
func (r *WorkloadClassReconciler) headroomFigures(ctx context.Context, wc *v1alpha1.WorkloadClass, st *v1alpha1.HeadroomStatus, res *render.Result, live plan.Children) error {
	if st == nil {
		forgetHeadroom(wc.Name)
		return nil
	}
	idleUnits := st.Ready
	if st.Ready > 0 {
		switch claims := live.NodeClaims[st.Rung]; st.Mechanism {
		case v1alpha1.HeadroomPods:
			warm, err := r.cluster(wc).WarmNodes(ctx, claims, r.Capabilities.HeadroomNamespaceOrDefault())
			if err != nil {
				return err
			}
			st.WarmNodes = warm
		case v1alpha1.HeadroomCapacityBuffer:
			rooms, err := r.cluster(wc).NodeRooms(ctx, claims)
			if err != nil {
				return err
			}
			st.WarmNodes, idleUnits = headroom.BufferWarmth(rooms, res.Headroom.Shape, st.Ready)
		}
	}
	idle := 0.0
	if h := res.Headroom; h.PriceSource != "" {
		idle = float64(idleUnits) * h.UnitPrice
		st.IdleCostPerHour, st.PriceSources = cost.Money(idle), h.PriceSource
	}
	for _, m := range []v1alpha1.HeadroomMechanism{v1alpha1.HeadroomPods, v1alpha1.HeadroomCapacityBuffer, v1alpha1.HeadroomOff} {
		if m != st.Mechanism {
			for _, g := range headroomGauges {
				g.DeleteLabelValues(wc.Name, string(m))
			}
		}
	}
	labels := prometheus.Labels{"class": wc.Name, "mechanism": string(st.Mechanism)}
	headroomDesired.With(labels).Set(float64(st.Desired))
	headroomReady.With(labels).Set(float64(st.Ready))
	headroomIdleCost.With(labels).Set(idle)
	headroomWarmNodes.With(labels).Set(float64(st.WarmNodes))
	return nil
}

// forgetHeadroom deletes a class's headroom series: the class, or its headroom, is gone,
// or its mechanism changed.
func forgetHeadroom(class string) {
	for _, g := range headroomGauges {
		g.DeletePartialMatch(prometheus.Labels{"class": class})
	}
}
