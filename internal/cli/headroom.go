package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
)

// headroomFlags are the manager's --headroom and --headroom-namespace, which the offline
// commands take too so that they render what the manager would. auto is the manager's
// only: it asks the cluster (internal/operator).
type headroomFlags struct {
	mode, namespace string
	manager         bool
}

// register adds both flags; what says what the mechanisms do for this command.
func (f *headroomFlags) register(fs *pflag.FlagSet, what string) {
	modes := "capacitybuffer (Karpenter's CapacityBuffer and its PodTemplate), pods (placeholder pods)"
	if f.manager {
		modes = "auto (CapacityBuffer when the cluster serves it and a probe finds Karpenter's CapacityBuffer gate on, else pods), " + modes
	}
	fs.StringVar(&f.mode, "headroom", "off", "how classes' spec.headroom is held: "+modes+" or off (none rendered; classes report Disabled); "+what+". The manager's default is off: headroom needs the namespace, PriorityClass and Role the chart installs with headroom.enabled (whose default mechanism is auto)")
	fs.StringVar(&f.namespace, "headroom-namespace", v1alpha1.DefaultHeadroomNamespace, "the namespace that holds the headroom's children (placeholder Deployments, PodTemplates, CapacityBuffers); only the manager may write there")
}

// apply sets the capabilities the flags give.
func (f *headroomFlags) apply(caps *capabilities.Capabilities) error {
	switch f.mode {
	case "off", "":
		caps.Headroom = v1alpha1.HeadroomOff
	case "pods":
		caps.Headroom = v1alpha1.HeadroomPods
	case "capacitybuffer":
		caps.Headroom = v1alpha1.HeadroomCapacityBuffer
	case "auto":
		if !f.manager {
			return usageError{fmt.Errorf("--headroom auto: only the manager decides it, against the cluster; say capacitybuffer or pods")}
		}
		caps.Headroom = v1alpha1.HeadroomAuto
	default:
		if f.manager {
			return usageError{fmt.Errorf("--headroom %q: must be auto, capacitybuffer, pods or off", f.mode)}
		}
		return usageError{fmt.Errorf("--headroom %q: must be capacitybuffer, pods or off", f.mode)}
	}
	caps.HeadroomNamespace = f.namespace
	return nil
}
