package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/capabilities"
)

// headroomFlags are the manager's --headroom and --headroom-namespace, which the offline
// commands take too so that they render what the manager would.
type headroomFlags struct {
	mode, namespace string
}

// register adds both flags; what says what pods does for this command.
func (f *headroomFlags) register(fs *pflag.FlagSet, what string) {
	fs.StringVar(&f.mode, "headroom", "off", "how classes' spec.headroom is held: pods ("+what+") or off (none rendered; classes report Disabled); the manager's default is off. auto and capacitybuffer are not built yet")
	fs.StringVar(&f.namespace, "headroom-namespace", v1alpha1.DefaultHeadroomNamespace, "the namespace that holds the headroom's placeholder Deployments; only the manager may write there")
}

// apply sets the capabilities the flags give.
func (f *headroomFlags) apply(caps *capabilities.Capabilities) error {
	switch f.mode {
	case "off", "":
		caps.Headroom = v1alpha1.HeadroomOff
	case "pods":
		caps.Headroom = v1alpha1.HeadroomPods
	default:
		return usageError{fmt.Errorf("--headroom %q: must be pods or off (auto and capacitybuffer are not built yet)", f.mode)}
	}
	caps.HeadroomNamespace = f.namespace
	return nil
}
