package controllers_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
)

// sent records every request the manager sends the API server (events included), so that
// a test can count those that concern one class.
var sent = &requestLog{}

type requestLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD path name-in-body"
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		line := req.Method + " " + req.URL.Path
		if req.Body != nil && req.GetBody != nil {
			if body, err := req.GetBody(); err == nil {
				b, _ := io.ReadAll(body)
				line += " " + string(bytes.ReplaceAll(b, []byte("\n"), nil))
			}
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, line)
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// mark is where counting starts.
func (l *requestLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// about counts, by "METHOD resource", the requests since mark that name class in their
// path or body; events count under "events", watches not at all.
func (l *requestLog) about(mark int, class string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, r := range l.reqs[mark:] {
		method, rest, _ := strings.Cut(r, " ")
		path, body, _ := strings.Cut(rest, " ")
		// Bodies may be protobuf (events): match the name anywhere in them.
		if !strings.Contains(path, "/"+class) && !strings.Contains(body, class) {
			continue
		}
		parts := strings.Split(strings.Trim(path, "/"), "/")
		resource := parts[len(parts)-1]
		if method != http.MethodPost {
			// .../RESOURCE/NAME or .../RESOURCE/NAME/status
			resource = parts[len(parts)-2]
			if parts[len(parts)-1] == "status" {
				resource = parts[len(parts)-3] + "/status"
			}
		}
		out[method+" "+resource]++
	}
	return out
}

var _ = Describe("Requests on the write path", func() {
	It("converges a new class in one request per child, the finalizer and one status write, and fans a Baseline edit out in one write per changed child", func() {
		create(newBaseline("for-counting")) // its own status is not the class's
		// The manager's cache holds the Baseline once its controller has recorded it: a class
		// created before then is planned once without it (BaselineNotFound, a status write and
		// an event), which is not what this spec counts.
		Eventually(func() int64 { return get(&v1alpha1.Baseline{}, "for-counting").Status.ObservedGeneration }).Should(BeEquivalentTo(1))
		mark := sent.mark()
		create(newClass("counted", "for-counting", func(wc *v1alpha1.WorkloadClass) {
			wc.Spec.Access = &v1alpha1.Access{Namespaces: []string{"team-counted"}}
			wc.Spec.Taints = v1alpha1.Taints{{Key: "example.com/dedicated", Value: "counted", Effect: corev1.TaintEffectNoSchedule}}
		}))
		// Its access rule would refuse other specs' pods: it goes, AccessRule first, at the end.
		DeferCleanup(func() {
			Expect(env.Client.Delete(ctx, &v1alpha1.WorkloadClass{ObjectMeta: metav1.ObjectMeta{Name: "counted"}})).To(Succeed())
			Eventually(exists(&v1alpha1.AccessRule{}, "counted")).Should(BeFalse())
		})
		waitSynced("counted")
		// Children: EC2NodeClass, 2 NodePools, the AccessRule.
		children := 1 + len(nodePoolNames("counted")()) + 1
		want := map[string]int{
			"PUT workloadclasses":          1,
			"PATCH workloadclasses/status": 1,
			"POST ec2nodeclasses":          1,
			"POST nodepools":               children - 2,
			"POST accessrules":             1,
		}
		// No event for a new class's first family, no read before a create, no second
		// status write: children + 2.
		Eventually(func() map[string]int { return sent.about(mark, "counted") }).Should(Equal(want))
		Consistently(func() map[string]int { return sent.about(mark, "counted") }, "3s").Should(Equal(want))

		// A Baseline tag reaches only the EC2NodeClass: one update and the status write that
		// records the drift notice. The one event is the Baseline's, for the whole fan-out
		// (its note names the class).
		mark = sent.mark()
		bl := get(&v1alpha1.Baseline{}, "for-counting")
		patch := client.MergeFrom(bl.DeepCopy())
		bl.Spec.NodeClass.Tags["fanout"] = "probe"
		Expect(env.Client.Patch(ctx, bl, patch)).To(Succeed())
		Eventually(func() map[string]string { return get(&awsv1.EC2NodeClass{}, "counted").Spec.Tags }).Should(HaveKeyWithValue("fanout", "probe"))
		want = map[string]int{
			"PUT ec2nodeclasses":           1,
			"PATCH workloadclasses/status": 1,
			"POST events":                  1,
		}
		// The unchanged NodePools and AccessRule are not written.
		Eventually(func() map[string]int { return sent.about(mark, "counted") }).Should(Equal(want))
		Consistently(func() map[string]int { return sent.about(mark, "counted") }, "3s").Should(Equal(want))
		Expect(get(&v1alpha1.WorkloadClass{}, "counted").Status.DriftNotice).To(ContainSubstring("EC2NodeClass/counted will drift"))
		Expect(baselineEvents("for-counting", "Drift")()).To(HaveLen(1))
		Expect(classEvents("counted", "Drift")()).To(BeZero())
	})
})
