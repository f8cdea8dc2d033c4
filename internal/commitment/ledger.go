package commitment

import (
	"sort"

	"github.com/poolsmith/poolsmith/internal/catalog"
)

// Node is one running node to price: its instance type, zone, capacity type and
// on-demand price per hour.
type Node struct {
	Name         string
	Type         *catalog.InstanceType
	Zone         string
	CapacityType string // spot, on-demand or reserved
	OnDemand     float64
}

// Ledger is what Allocate found: per commitment the share used, per node the covered
// fraction of its hour and which commitments covered it.
type Ledger struct {
	Used    map[string]float64 // by commitment id, in its unit ($/h or normalized units)
	Covered map[string]float64 // by node name, 0..1
	By      map[string][]string
}

// Room is what is left of entitlement for c.
func (l Ledger) Room(c Commitment, entitlement float64) float64 {
	return max(0, entitlement-l.Used[c.ID])
}

// Allocate applies commitments to nodes as AWS does: Reserved Instances first, then EC2
// Instance Savings Plans, then Compute Savings Plans; within a kind the commitment with
// the highest savings first (ties: the lower rate), and each commitment to the usage with
// the highest savings first. Spot is never covered; on-demand and reserved capacity
// (billed at the on-demand rate) are. A node may be covered for part of its hour.
// entitlement caps each commitment (by id) at this scope's part of it.
func Allocate(nodes []Node, commitments []Commitment, region string, entitlement map[string]float64) Ledger {
	l := Ledger{Used: map[string]float64{}, Covered: map[string]float64{}, By: map[string][]string{}}
	type use struct {
		node          *Node
		rate, savings float64
	}
	order := make([]Commitment, len(commitments))
	copy(order, commitments)
	bestSavings := func(c Commitment) (float64, float64) {
		best, rate := 0.0, 0.0
		for _, n := range nodes {
			if r, _, ok := c.Rate(n.Type, n.OnDemand, region, n.Zone); ok && n.OnDemand > 0 {
				if s := 1 - r/n.OnDemand; s > best {
					best, rate = s, r
				}
			}
		}
		return best, rate
	}
	sort.SliceStable(order, func(a, b int) bool {
		if order[a].Kind != order[b].Kind {
			return order[a].Kind < order[b].Kind
		}
		sa, ra := bestSavings(order[a])
		sb, rb := bestSavings(order[b])
		if sa != sb {
			return sa > sb
		}
		return ra < rb
	})
	for _, c := range order {
		var uses []use
		for i := range nodes {
			n := &nodes[i]
			if n.CapacityType == "spot" || n.Type == nil || l.Covered[n.Name] >= 1 {
				continue
			}
			r, _, ok := c.Rate(n.Type, n.OnDemand, region, n.Zone)
			if !ok {
				continue
			}
			uses = append(uses, use{node: n, rate: r, savings: 1 - r/n.OnDemand})
		}
		sort.SliceStable(uses, func(a, b int) bool {
			if uses[a].savings != uses[b].savings {
				return uses[a].savings > uses[b].savings
			}
			return uses[a].rate < uses[b].rate
		})
		for _, u := range uses {
			room := entitlement[c.ID] - l.Used[c.ID]
			if room <= 0 {
				break
			}
			need := c.Use(u.node.Type, u.rate) * (1 - l.Covered[u.node.Name])
			if need <= 0 {
				continue
			}
			take := min(need, room)
			l.Used[c.ID] += take
			l.Covered[u.node.Name] += (1 - l.Covered[u.node.Name]) * take / need
			l.By[u.node.Name] = append(l.By[u.node.Name], c.ID)
		}
	}
	return l
}
