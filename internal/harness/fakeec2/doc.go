// Package fakeec2 is the simulated EC2 account the end-to-end suite and `make demo` run
// Karpenter's AWS provider against. It builds on the provider's own fake AWS APIs
// (github.com/aws/karpenter-provider-aws/pkg/fake) and fixes what they lack for a
// provider that runs its real controllers:
//
//   - Instance types, offerings (every zone, spot and on-demand) and prices come from
//     Poolsmith's catalog (internal/catalog), so Karpenter and `poolsmith simulate` see
//     the same types and prices. Spot is priced at the catalog's regional average in every
//     zone, as simulate prices it.
//   - Subnets and security groups are seeded in the region's zones and tagged with the
//     discovery tags the caller names; selectors that match nothing find nothing.
//   - SSM answers every parameter with an AMI id that encodes the parameter path, and
//     DescribeImages answers ids and names with images whose architecture follows the
//     path (the fake returns random x86_64 images, which breaks every arm64 NodePool).
//   - CreateFleet is a fleet of our own (see fleet.go): it drops overrides whose capacity
//     pool is switched off and reports them as InsufficientInstanceCapacity, picks the
//     cheapest remaining override (or the highest priority when Karpenter asks for a
//     prioritized fleet, which it does when NodeOverlays adjust prices), and launches an
//     instance that carries its launch tags, subnet, AMI and security groups.
//   - Capacity reservations (see reservations.go) live in the account, not in the fake's
//     private map: DescribeCapacityReservations lists them with their live free counts
//     for the filters Karpenter's selector terms send; a launch template's
//     CapacityReservationSpecification decides whether a launch uses one
//     (capacity-reservations-only: its target, else ReservationCapacityExceeded; none:
//     never; open or none given: an open one of the pool with room), and terminating an
//     instance frees its slot. The provider's fake checks a target's count but never
//     decrements it.
//
// Capacity can be switched off and on per (instance type, zone, capacity type) with
// SetAvailable; every launch is recorded for tests to inspect.
package fakeec2
