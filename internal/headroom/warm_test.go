package headroom_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/poolsmith/poolsmith/internal/headroom"
)

func res(cpu, mem string) corev1.ResourceList {
	out := corev1.ResourceList{}
	if cpu != "" {
		out[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func TestRoomUnits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		room, shape corev1.ResourceList
		want        int32
	}{
		{"cpu bound", res("1930m", "14Gi"), res("900m", "1Gi"), 2},
		{"memory bound", res("8", "3Gi"), res("1", "1536Mi"), 2},
		{"exact fit is a fit", res("1800m", ""), res("900m", ""), 2},
		{"room without a resource the unit names", res("8", ""), res("1", "1Gi"), 0},
		{"overcommitted room", res("-500m", "1Gi"), res("100m", ""), 0},
		{"a GPU unit on a node without GPUs", res("8", "32Gi"), corev1.ResourceList{headroom.ResourceGPU: resource.MustParse("1")}, 0},
		{"a shape naming nothing", res("8", "32Gi"), corev1.ResourceList{}, 0},
	} {
		if got := headroom.RoomUnits(tc.room, tc.shape); got != tc.want {
			t.Errorf("%s: RoomUnits = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestBufferWarmth(t *testing.T) {
	unit := res("1", "")
	empty := func(cpu string) headroom.NodeRoom { return headroom.NodeRoom{Room: res(cpu, ""), Empty: true} }
	busy := func(cpu string) headroom.NodeRoom { return headroom.NodeRoom{Room: res(cpu, "")} }
	for _, tc := range []struct {
		name       string
		nodes      []headroom.NodeRoom
		ready      int32
		warm, idle int32
	}{
		{"one empty node holds both units", []headroom.NodeRoom{empty("2")}, 2, 1, 2},
		{"an empty node beyond the need is not the buffer's", []headroom.NodeRoom{empty("2"), empty("2"), empty("2")}, 2, 1, 2},
		{"the fewest nodes: the largest first", []headroom.NodeRoom{empty("1"), empty("3"), empty("1")}, 3, 1, 3},
		{"units spread over empty nodes", []headroom.NodeRoom{empty("1"), empty("1"), empty("1")}, 2, 2, 2},
		{"an empty node too small for a unit holds none", []headroom.NodeRoom{empty("500m"), empty("2")}, 2, 1, 2},
		{"a burst took the warm node: nothing empty, the room left is idle", []headroom.NodeRoom{busy("1"), busy("0")}, 2, 0, 1},
		{"room beside real pods is idle, not warm", []headroom.NodeRoom{busy("3"), empty("1")}, 2, 1, 2},
		{"not ready: nothing", []headroom.NodeRoom{empty("2")}, 0, 0, 0},
		{"no node registered yet", nil, 2, 0, 0},
	} {
		warm, idle := headroom.BufferWarmth(tc.nodes, unit, tc.ready)
		if warm != tc.warm || idle != tc.idle {
			t.Errorf("%s: BufferWarmth = %d warm, %d idle; want %d, %d", tc.name, warm, idle, tc.warm, tc.idle)
		}
	}
}
