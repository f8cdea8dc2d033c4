package v1alpha1_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/poolsmith/poolsmith/internal/harness/testenv"
)

var (
	ctx context.Context
	env *testenv.Env
)

func TestAPIValidation(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission validation against a real kube-apiserver")
}

var _ = BeforeSuite(func() {
	ctx = context.Background()
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
