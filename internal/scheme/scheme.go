// Package scheme owns the runtime.Scheme every Poolsmith client uses: client-go's
// built-in types, Karpenter's NodePool, NodeClaim, NodeOverlay, CapacityBuffer and EC2NodeClass (their API packages
// register themselves in client-go's scheme at init) and poolsmith.dev/v1alpha1.
package scheme

import (
	// Registers karpenter.k8s.aws/v1 EC2NodeClass in client-go's scheme.
	_ "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	// Registers karpenter.sh/v1 NodePool and NodeClaim in client-go's scheme.
	_ "sigs.k8s.io/karpenter/pkg/apis/v1"
	// Registers karpenter.sh/v1alpha1 NodeOverlay in client-go's scheme.
	_ "sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	// Registers autoscaling.x-k8s.io/v1beta1 CapacityBuffer (headroom) in client-go's scheme.
	_ "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	poolsmithv1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// Scheme knows every type Poolsmith reads or writes.
var Scheme *runtime.Scheme = clientgoscheme.Scheme

func init() {
	utilruntime.Must(poolsmithv1alpha1.AddToScheme(Scheme))
}
