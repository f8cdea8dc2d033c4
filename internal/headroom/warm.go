package headroom

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// NodeRoom is one registered node of the headroom's rung, as a CapacityBuffer's warm
// nodes are judged: the room its pods leave of its allocatable, and whether it runs no pod
// but DaemonSet and mirror pods.
type NodeRoom struct {
	Room  corev1.ResourceList
	Empty bool
}

// RoomUnits is how many units fit in room: the smallest, over the resources shape names,
// of floor(room / shape); 0 when room lacks one of them or shape names none.
func RoomUnits(room, shape corev1.ResourceList) int32 {
	n, named := int64(math.MaxInt32), false
	for name, q := range shape {
		if q.Sign() <= 0 {
			continue
		}
		named = true
		r := room[name]
		n = min(n, int64(math.Floor(math.Round(r.AsApproximateFloat64()/q.AsApproximateFloat64()*1e9)/1e9)))
	}
	if !named {
		return 0
	}
	return int32(max(n, 0))
}

// BufferWarmth is what a CapacityBuffer's ready units keep warm on the rung's nodes.
// Karpenter holds them as virtual pods in its memory only, so where they sit is not seen;
// what is seen is the room they need. warm is the fewest empty nodes (those holding the
// most units first) whose room holds ready units, and no more nodes than that need: an
// empty node beyond it is not the buffer's. idle is ready capped by the units that fit in
// the room of all the nodes: less than ready when real pods took the room since
// Karpenter's last provisioning pass (its condition is then stale).
func BufferWarmth(nodes []NodeRoom, shape corev1.ResourceList, ready int32) (warm, idle int32) {
	var empty []int32
	total := int64(0)
	for _, n := range nodes {
		u := RoomUnits(n.Room, shape)
		total += int64(u)
		if n.Empty && u > 0 {
			empty = append(empty, u)
		}
	}
	sort.Slice(empty, func(i, j int) bool { return empty[i] > empty[j] })
	need := int64(ready)
	for _, u := range empty {
		if need <= 0 {
			break
		}
		warm++
		need -= int64(u)
	}
	return warm, int32(min(int64(ready), total))
}
