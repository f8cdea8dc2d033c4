// Package headroom decides how much spare capacity a WorkloadClass keeps warm
// (spec.headroom): whether its schedule is open and when that next changes, how many units
// its size asks for from live usage (with hysteresis, so the count does not chase every
// pod), what caps it, and the class's typical pod when no shape is given. It is pure: no
// client, no clock of its own. The WorkloadClass reconciler feeds it the time, the usage it
// observed and the previous status, and hands the result to the renderer, which renders the
// children (a Deployment of placeholder pods, or a CapacityBuffer and its PodTemplate).
package headroom
