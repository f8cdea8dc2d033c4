package controllers_test

import (
	"fmt"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// baselineEvents are the notes of the events recorded on a Baseline with the given reason.
func baselineEvents(baseline, reason string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		ExpectWithOffset(1, env.Client.List(ctx, list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == baseline && e.Regarding.Kind == "Baseline" && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
}

// classEventsOf sums classEvents over classes and reasons.
func classEventsOf(classes []string, reasons ...string) func() int {
	return func() int {
		n := 0
		for _, c := range classes {
			for _, r := range reasons {
				n += classEvents(c, r)()
			}
		}
		return n
	}
}

var _ = Describe("Baselines", func() {
	It("write their class count once it settles, not at every class created", func() {
		create(newBaseline("settle"))
		Eventually(func() int64 { return get(&v1alpha1.Baseline{}, "settle").Status.ObservedGeneration }).Should(BeNumerically("==", 1))
		mark := sent.mark()
		const classes = 5
		for i := range classes {
			create(newClass(fmt.Sprintf("settle-%d", i), "settle"))
			// Apart enough for a count written at every create to be written each time.
			time.Sleep(300 * time.Millisecond)
		}
		Eventually(func() int32 { return get(&v1alpha1.Baseline{}, "settle").Status.Classes }).Should(BeNumerically("==", classes))
		writes := func() int { return sent.about(mark, "settle")["PATCH baselines/status"] }
		Consistently(writes, "3s").Should(Equal(1))
	})

	It("announce an edit's fan-out in one event on the Baseline, and a class's own changes on the class", func() {
		names := []string{"fanned-a", "fanned-b", "fanned-c"}
		create(newBaseline("fanned"))
		for _, n := range names {
			create(newClass(n, "fanned"))
		}
		for _, n := range names {
			waitSynced(n)
		}
		b := get(&v1alpha1.Baseline{}, "fanned")
		patch := client.MergeFrom(b.DeepCopy())
		b.Spec.NodeClass.Tags["fanned"] = "yes"
		Expect(env.Client.Patch(ctx, b, patch)).To(Succeed())
		for _, n := range names {
			Eventually(func() map[string]string { return get(&awsv1.EC2NodeClass{}, n).Spec.Tags }).Should(HaveKeyWithValue("fanned", "yes"))
			Eventually(func() string { return get(&v1alpha1.WorkloadClass{}, n).Status.DriftNotice }).Should(Equal("EC2NodeClass/" + n + " will drift: Karpenter replaces their nodes"))
		}
		Eventually(baselineEvents("fanned", "Drift")).Should(ConsistOf(
			"generation 2 updated the children of 3 classes (fanned-a, fanned-b, fanned-c): EC2NodeClass spec.tags.fanned; Karpenter will replace the nodes of 3 of them (each class's status.driftNotice names its children)"))
		Consistently(baselineEvents("fanned", "Drift"), "3s").Should(HaveLen(1))
		Expect(classEventsOf(names, "Drift", "Applied")()).To(BeZero(), "no event on the classes the edit reached")

		// A hand edit reverted is the class's own: its event is on the class.
		np := get(&karpv1.NodePool{}, "fanned-a-spot-amd64")
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h")
		Expect(env.Client.Update(ctx, np)).To(Succeed())
		Eventually(classEvents("fanned-a", "Drift")).Should(Equal(1))

		// So is the team's edit of the class.
		wc := get(&v1alpha1.WorkloadClass{}, "fanned-b")
		wc.Spec.ExpireAfter = ptr.To(karpv1.MustParseNillableDuration("48h"))
		updateClass(wc)
		Eventually(classEvents("fanned-b", "Drift")).Should(BeNumerically(">=", 1))
		Expect(baselineEvents("fanned", "Drift")()).To(HaveLen(1))
	})
})
