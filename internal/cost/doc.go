// Package cost prices a WorkloadClass from the NodeClaims it holds (status.cost): each
// launched NodeClaim at its own instance type and capacity type through the same priced
// catalog the weights use (the embedded catalog with the spot signals laid over it), the
// fallback premium (what nodes below the preferred rung cost above the same capacity on
// it), the idle part (capacity no pod requests) and the month-to-date estimate kept in
// status. It is pure: observe gathers its Input (Cluster.Cost), the CostReconciler in
// controllers/ writes what it computes, and the CLI prints it.
//
// Prices are regional: the catalog holds one on-demand price and one spot price (the
// average over the region's zones, as the weights and the fake EC2 use) per type, so a
// NodeClaim's zone is kept but does not change its price. Reserved capacity is priced at
// the on-demand rate, which is what an On-Demand Capacity Reservation bills whether it is
// used or not.
package cost
