// Package simulate answers "where would these pods land, on which instance types, at what
// cost?" before anything is applied, by running Karpenter's own scheduler
// (sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling) over rendered NodePools
// and a workload, with the embedded catalog as the cloud provider's instance types. It
// does not re-implement scheduling: Karpenter decides which NodePool and which instance
// types each NodeClaim may use; this package then makes the launch choice the AWS
// provider would make (see launch.go) and adds up the cost.
//
// The model and its limits:
//   - Offerings: every catalog type with a price in the region is offered in every given
//     zone (or only the types, zones and capacity types of Options.Offerings, what an
//     account offers: offerings.go), on-demand at its on-demand price and, when it has a
//     spot price, spot at the region's average spot price, from the priced catalog the options give (the
//     advisor's on-demand x (1 - savings) where signals have it), so launch choice and
//     cost use the same prices as the weights. The catalog has no per-zone spot prices (the source's
//     zone array is unlabelled) nor per-zone availability, so zones differ only by what
//     topology spread asks of them.
//   - Capacity: vCPU and memory from the catalog, less the AWS provider's 7.5% VM memory
//     overhead; 110 pods (the model does not know ENI limits); GPUs as nvidia.com/gpu or
//     amd.com/gpu; 20Gi of ephemeral storage.
//   - Overhead: Karpenter's kube-reserved CPU (6% of the first core, 1% of the second,
//     0.5% of the next two, 0.25% of the rest) and memory (255Mi + 11Mi per pod), and the
//     100Mi memory eviction threshold; and the DaemonSets given (Options.DaemonSetPods),
//     whose requests Karpenter's scheduler adds to every NodeClaim they would run on.
//   - Reservations (Options.Reservations, reservations.go): each capacity reservation is a
//     reserved offering of its type in its zone with its available count, priced as the
//     AWS provider prices it (on-demand / 10,000,000); the scheduler runs in Karpenter's
//     strict reserved-offering mode, so a pod whose rung allows only a full reservation
//     waits. A reserved NodeClaim is priced at on-demand, what the reservation bills.
//   - Commitments (Options.Commitments, commitments.go): every NodeClaim of a class with
//     Savings Plans or Reserved Instances is priced with commitment.Allocate against the
//     class's entitlement, starting from no coverage (offline nothing runs), in launch
//     order: its list price, what covers it and how much, its effective price; and the
//     entitlement left unused. The batch is one: Karpenter puts it on the top rung, so a
//     commitment can run out inside it (the overshoot the manager's state bounds to one
//     batch).
package simulate
