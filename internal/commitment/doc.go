// Package commitment is the arithmetic of Savings Plans and Reserved Instances, pure (no
// client), shared by the renderer, the controller, simulate and cost:
// Resolve reads a Baseline's spec.commitments into figures (leaving out, with the field
// named, what cannot price anything: an expired plan, one without facts); Entitlements
// splits each commitment's share among the Baseline's classes (allocations first, then
// equally per team); Rate is what one instance of a type draws from a commitment;
// Allocate applies commitments to running nodes in AWS's order; Next is the hysteresis
// that turns a class's room into the Open or Exhausted state the weights use. See
// docs/commitments.md and docs/design/commitments.md.
package commitment
