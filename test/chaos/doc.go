// Package chaos holds the fault suite (build tag chaos, `make chaos`): Poolsmith's manager
// runs as a real OS process (bin/poolsmith built by the suite) against a real
// kube-apiserver and etcd with Karpenter's and Poolsmith's CRDs, and is killed, stopped,
// cut off from its API server and fought over:
//
//   - SIGKILL at seeded random moments through class creation, a Baseline fan-out, a
//     Retire prune and class deletion, restarted each time (CHAOS_KILLS, CHAOS_SEED);
//   - the API server stopped and restarted over the same etcd mid-rollout, and a class
//     edited (through a second API server) while the manager's watches were down;
//   - two replicas with leader election: the leader SIGSTOPped past its lease and
//     continued, and SIGKILLed; the API server's audit log shows who wrote when;
//   - a second writer editing generated NodePools in a tight loop
//     (CHAOS_CONFLICT_DURATION).
//
// Karpenter does not run: a stand-in sets each NodePool's status.nodes (1, then 0 once it
// is retired), which is all a Retire prune waits for. Every scenario prints its figures
// with t.Log; run with -v (make chaos does) to see them. CHAOS_LOG_DIR keeps the managers'
// logs and the audit log.
package chaos
