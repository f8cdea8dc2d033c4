package commitment

import "time"

// DefaultOpenDwell is how long two nodes of room must hold before an Exhausted commitment
// is Open again: consolidation replaces nodes one at a time and briefly runs both.
const DefaultOpenDwell = 5 * time.Minute

// State is a commitment's state for one class: Open while it has room for the next node,
// so the rungs it covers rank by its price; Exhausted otherwise.
type State struct {
	Open bool
	// Since is when the state last changed.
	Since time.Time
	// OpenPendingSince is when an Exhausted commitment first had two nodes of room, in the
	// current stretch; zero otherwise.
	OpenPendingSince time.Time
}

// Next is the hysteresis on whole nodes. node is what the next node draws (the effective
// hourly of the median type of the class's most expensive covered rung, or its normalized
// units); room what is left of the class's entitlement. Open turns Exhausted at once when
// less than one node of room is left (waiting would bill every node launched meanwhile at
// list); Exhausted turns Open when at least two nodes of room have held for dwell. A first
// state (prev nil) is Open when one node fits.
func Next(prev *State, room, node float64, now time.Time, dwell time.Duration) State {
	fits := func(n float64) bool { return room >= n*node-1e-9 }
	if prev == nil {
		return State{Open: fits(1), Since: now}
	}
	if prev.Open {
		if !fits(1) {
			return State{Open: false, Since: now}
		}
		return *prev
	}
	if !fits(2) {
		return State{Open: false, Since: prev.Since}
	}
	if prev.OpenPendingSince.IsZero() {
		return State{Open: false, Since: prev.Since, OpenPendingSince: now}
	}
	if now.Sub(prev.OpenPendingSince) >= dwell {
		return State{Open: true, Since: now}
	}
	return *prev
}
