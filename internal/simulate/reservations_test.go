package simulate_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/simulate"
)

// pinnedPool is a NodePool of m7g.xlarge at one capacity type.
func pinnedPool(name string, weight int32, capacityType string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Weight: &weight, Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m7g.xlarge"}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{capacityType}},
			},
		}}},
	}
}

// A reservation of 2 m7g.xlarge in us-east-1a takes the first two nodes of a reserved rung
// that ranks first, billed at on-demand; the third pod waits, as with Karpenter v1.15.0
// (strict reserved-offering mode), rather than falling to the spot rung
// (docs/commitments.md, Capacity reservations).
func TestReservationsFillTheReservedRungThenThePodWaits(t *testing.T) {
	pools := []*karpv1.NodePool{pinnedPool("spot", 50, karpv1.CapacityTypeSpot), pinnedPool("odcr", 100, karpv1.CapacityTypeReserved)}
	opts := simulate.Options{Region: "us-east-1", Zones: zones,
		Reservations: []simulate.Reservation{{ID: "cr-1", InstanceType: "m7g.xlarge", Zone: "us-east-1a", Available: 2}}}
	res, err := simulate.Run(context.Background(), pools, pods(3, "app", "3"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodeClaims) != 2 {
		t.Fatalf("%d NodeClaims, want 2: %+v", len(res.NodeClaims), res.NodeClaims)
	}
	for _, nc := range res.NodeClaims {
		if nc.NodePool != "odcr" || nc.CapacityType != karpv1.CapacityTypeReserved || nc.ReservationID != "cr-1" || nc.Zone != "us-east-1a" || !near(nc.PricePerHour, 0.1632) {
			t.Errorf("NodeClaim %+v, want reserved in cr-1, us-east-1a, at on-demand $0.1632", nc)
		}
	}
	if len(res.Unschedulable) != 1 {
		t.Errorf("unschedulable %v, want the third pod waiting for the reservation", res.Unschedulable)
	}
	for pod, why := range res.Unschedulable {
		if !strings.Contains(why, "reserved offerings") {
			t.Errorf("%s: %s; want Karpenter's reserved-offering error", pod, why)
		}
	}

	// Without the reservation the reserved rung has no offering: everything goes to spot.
	opts.Reservations = nil
	res, err = simulate.Run(context.Background(), pools, pods(3, "app", "3"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodeClaims) != 3 || res.NodeClaims[0].NodePool != "spot" || res.NodeClaims[0].ReservationID != "" {
		t.Errorf("without reservations: %+v", res.NodeClaims)
	}

	opts.Reservations = []simulate.Reservation{{ID: "cr-2", InstanceType: "m7g.xlarge", Zone: "eu-west-1a", Available: 1}}
	if _, err := simulate.Run(context.Background(), pools, pods(1, "app", "3"), opts); err == nil || !strings.Contains(err.Error(), "cr-2") {
		t.Errorf("a reservation in a zone not offered: %v", err)
	}
}
