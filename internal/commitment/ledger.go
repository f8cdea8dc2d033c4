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
	// Drawn is, by node name, what its covered part costs at the covering commitments'
	// rates, US dollars per hour: the node's effective price is Drawn plus its uncovered
	// part at list.
	Drawn map[string]float64
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
	l := Ledger{Used: map[string]float64{}, Covered: map[string]float64{}, By: map[string][]string{}, Drawn: map[string]float64{}}
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
			part := (1 - l.Covered[u.node.Name]) * take / need
			l.Used[c.ID] += take
			l.Covered[u.node.Name] += part
			l.Drawn[u.node.Name] += part * u.rate
			l.By[u.node.Name] = append(l.By[u.node.Name], c.ID)
		}
	}
	return l
}

// Effective is what a node costs per hour under the ledger: its covered part at the
// covering commitments' rates, the rest at list (its price at its capacity type).
func (l Ledger) Effective(node string, list float64) float64 {
	return l.Drawn[node] + (1-l.Covered[node])*list
}

// Unused is the entitlement left unused, US dollars per hour: what is paid for and not
// used. A Reserved Instance's units are priced at its rate per unit (its effectiveHourly
// over its size's normalization factor, else on-demand less DefaultRIDiscount).
func (l Ledger) Unused(commitments []Commitment, entitlement map[string]float64, cat *catalog.Catalog, region string) float64 {
	total := 0.0
	for _, c := range commitments {
		room := max(0, entitlement[c.ID]-l.Used[c.ID])
		if c.Kind != ReservedInstance {
			total += room
			continue
		}
		t := cat.Types[c.InstanceType]
		nf := NormalizationFactor(c.InstanceType)
		if t == nil || nf == 0 {
			continue
		}
		if rate, _, ok := c.Rate(t, cat.Prices[region][c.InstanceType].OnDemand, region, c.Zone); ok {
			total += room * rate / nf
		}
	}
	return total
}
