package simulate

import (
	"fmt"
	"slices"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/commitment"
)

// ClassCommitments are one class's commitments as simulate prices its nodes.
type ClassCommitments struct {
	Class string
	// NodePools are the class's rungs: the NodeClaims placed on them are the class's nodes.
	NodePools []string
	// Declared are its Baseline's commitments that still run, in AWS's order (what render
	// resolved, Settings.Commitments.Declared).
	Declared []commitment.Commitment
	// Entitlements are the class's part of each commitment by id, in its unit ($/h of a
	// Savings Plan, normalized units of a Reserved Instance); 0 or absent when the class
	// ignores commitments.
	Entitlements map[string]float64
}

// NodeCommitment is how its class's commitments price one NodeClaim.
type NodeCommitment struct {
	// CoveredBy are the commitments that cover it, wholly or in part, in the order they
	// were applied.
	CoveredBy []string `json:"coveredBy,omitempty"`
	// Covered is the covered fraction of its hour, 0 to 1.
	Covered float64 `json:"covered"`
	// EffectivePerHour is its covered part at the covering commitments' rates, the rest
	// at its list price (PricePerHour), USD.
	EffectivePerHour float64 `json:"effectivePerHour"`
}

// Commitments is how the classes' commitments price the placed nodes.
type Commitments struct {
	// EffectivePerHour is every NodeClaim at its effective price (list where no
	// commitment covers it), USD; Totals.CostPerHour is the same at list.
	EffectivePerHour float64 `json:"effectivePerHour"`
	// UnusedEntitlementPerHour is the classes' entitlement their nodes leave unused, USD
	// per hour: paid for whether used or not.
	UnusedEntitlementPerHour float64 `json:"unusedEntitlementPerHour"`
	// PaidPerHour is what the hour costs: the effective figure plus the unused entitlement.
	PaidPerHour float64 `json:"paidPerHour"`
	// Uses are one per class and commitment, in class order, then AWS's.
	Uses []CommitmentUse `json:"uses"`
	// Overshoots say which commitments ran out inside the simulated batch.
	Overshoots []string `json:"overshoots,omitempty"`

	ledgers map[string]*commitment.Ledger
	unused  map[string]float64
}

// CommitmentUse is what one class's nodes used of one commitment.
type CommitmentUse struct {
	Class      string `json:"class"`
	Commitment string `json:"commitment"`
	// Describe names it: "Savings Plan sp-0a1b2c3d (EC2Instance m7g us-east-1)".
	Describe string `json:"describe"`
	// Unit of Entitlement and Used: "USD/h" (a Savings Plan) or "normalized units".
	Unit        string  `json:"unit"`
	Entitlement float64 `json:"entitlement"`
	Used        float64 `json:"used"`
	// Nodes it covers, wholly or in part.
	Nodes int `json:"nodes"`
	// UnusedPerHour is the entitlement left unused, USD per hour.
	UnusedPerHour float64 `json:"unusedPerHour"`
	// OvershootPerHour, when it ran out inside the batch, is the list price of the
	// uncovered part of the nodes it could have covered, USD.
	OvershootPerHour float64 `json:"overshootPerHour,omitempty"`
}

// Ledger is what Allocate found of class's nodes (NodeClaims by Name) and the entitlement
// they leave unused, USD per hour; ok is false for a class without commitments.
func (c *Commitments) Ledger(class string) (*commitment.Ledger, float64, bool) {
	if c == nil || c.ledgers[class] == nil {
		return nil, 0, false
	}
	return c.ledgers[class], c.unused[class], true
}

// priceCommitments prices every NodeClaim of res with its class's commitments: offline no
// coverage is known, so each class starts from none and its nodes are covered in launch
// order (AWS's order first: commitment.Allocate), each class against its own entitlement.
// launched is res.NodeClaims' indexes in launch order.
func priceCommitments(res *Result, classes []ClassCommitments, launched []int, cat *catalog.Catalog, region string) {
	out := &Commitments{ledgers: map[string]*commitment.Ledger{}, unused: map[string]float64{}}
	prices := cat.Prices[region]
	classOf := map[string]string{}
	for _, cc := range classes {
		for _, np := range cc.NodePools {
			classOf[np] = cc.Class
		}
	}
	byClass := map[string][]int{}
	for _, i := range launched {
		if class, ok := classOf[res.NodeClaims[i].NodePool]; ok {
			byClass[class] = append(byClass[class], i)
		}
	}
	for _, cc := range classes {
		var nodes []commitment.Node
		list := map[string]float64{}
		for _, i := range byClass[cc.Class] {
			nc := &res.NodeClaims[i]
			list[nc.Name] = nc.PricePerHour
			if t := cat.Types[nc.InstanceType]; t != nil {
				nodes = append(nodes, commitment.Node{Name: nc.Name, Type: t, Zone: nc.Zone, CapacityType: nc.CapacityType, OnDemand: prices[nc.InstanceType].OnDemand})
			}
		}
		ledger := commitment.Allocate(nodes, cc.Declared, region, cc.Entitlements)
		out.ledgers[cc.Class] = &ledger
		for _, i := range byClass[cc.Class] {
			nc := &res.NodeClaims[i]
			nc.Commitment = &NodeCommitment{CoveredBy: ledger.By[nc.Name], Covered: ledger.Covered[nc.Name],
				EffectivePerHour: ledger.Effective(nc.Name, nc.PricePerHour)}
		}
		for _, c := range cc.Declared {
			use := CommitmentUse{Class: cc.Class, Commitment: c.ID, Describe: c.Describe(), Unit: "USD/h",
				Entitlement: cc.Entitlements[c.ID], Used: ledger.Used[c.ID],
				UnusedPerHour: ledger.Unused([]commitment.Commitment{c}, cc.Entitlements, cat, region)}
			if c.Kind == commitment.ReservedInstance {
				use.Unit = "normalized units"
			}
			var short []string
			could := 0
			for _, n := range nodes {
				if slices.Contains(ledger.By[n.Name], c.ID) {
					use.Nodes++
				}
				if _, _, covers := c.Rate(n.Type, n.OnDemand, region, n.Zone); !covers || n.CapacityType == karpv1.CapacityTypeSpot {
					continue
				}
				could++
				if part := 1 - ledger.Covered[n.Name]; part > 1e-9 {
					use.OvershootPerHour += part * list[n.Name]
					short = append(short, fmt.Sprintf("%s covered %.1f %%", n.Name, 100*ledger.Covered[n.Name]))
				}
			}
			// It ran out inside the batch: it had room, used all of it, and nodes it
			// covers still bill (partly) at list.
			if use.Entitlement <= 0 || use.Used < use.Entitlement-1e-9 || len(short) == 0 {
				use.OvershootPerHour = 0
			} else {
				out.Overshoots = append(out.Overshoots, fmt.Sprintf(
					"overshoot: %s ran out for class %s inside this batch: $%.4f/h of the %d nodes it could cover bills at list (%s); the manager's state changes when a batch's NodeClaims appear, so one batch can overshoot",
					c.Describe(), cc.Class, use.OvershootPerHour, could, listed(short)))
			}
			out.unused[cc.Class] += use.UnusedPerHour
			out.Uses = append(out.Uses, use)
		}
	}
	for _, nc := range res.NodeClaims {
		if nc.Commitment != nil {
			out.EffectivePerHour += nc.Commitment.EffectivePerHour
		} else {
			out.EffectivePerHour += nc.PricePerHour
		}
	}
	for _, u := range out.unused {
		out.UnusedEntitlementPerHour += u
	}
	out.PaidPerHour = out.EffectivePerHour + out.UnusedEntitlementPerHour
	res.Commitments = out
}

// listed names at most a few nodes: a batch can hold thousands.
func listed(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
