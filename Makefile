# Poolsmith. `make help` lists the targets.

# Karpenter v1.15.0 needs Go >= 1.26.9; the go command fetches this toolchain from the
# module proxy on first use (about 10 s).
export GOTOOLCHAIN := go1.27.3

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN            := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
HELM           := $(BIN)/helm
GINKGO         := $(BIN)/ginkgo
CRD_REF_DOCS   := $(BIN)/crd-ref-docs
CONTROLLER_TOOLS_VERSION := v0.23.0
CRD_REF_DOCS_VERSION     := v0.3.0
GINKGO_VERSION = $(shell GOTOOLCHAIN=$(GOTOOLCHAIN) go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2 2>/dev/null)

# Fuzz time per target for `make fuzz`.
FUZZTIME ?= 60s
# Extra flags for go test, e.g. TESTFLAGS='-run TestRender -v'.
TESTFLAGS ?=
# Time cap of the end-to-end suite and of the demo's smoke test; the suite takes about
# 9 minutes on 2 shared cores.
E2E_TIMEOUT ?= 16m
# Parallel Ginkgo processes of the end-to-end suite (one cluster, started by process 1;
# see test/e2e/doc.go), and extra ginkgo flags for it, e.g. E2EFLAGS='--focus Rebalance'.
E2E_PROCS ?= 5
E2EFLAGS ?=
# The fault suite (make chaos): SIGKILLs of the manager, their random moments' seed (empty:
# a new seed, printed), and how long the conflicting writer runs.
CHAOS_KILLS ?= 20
CHAOS_SEED ?=
CHAOS_CONFLICT_DURATION ?= 30s

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs (int32 fields bounded by hack/crdbounds, commitment families from the catalog by hack/crdfamilies, gzip copies for the binary by hack/crdpack) and RBAC into config/, and the chart's RBAC and CRDs from them.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./hack/crdbounds
	go run ./hack/crdfamilies
	go run ./hack/crdpack
	go run ./hack/chartgen

.PHONY: generate
generate: controller-gen ## Generate deepcopy methods for the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: docs
docs: crd-ref-docs ## Generate the API reference (docs/reference/api.md, from the Go types) and the CLI reference (docs/reference/cli/, from the cobra commands).
	mkdir -p docs/reference
	$(CRD_REF_DOCS) --log-level=ERROR --source-path=api/v1alpha1 --config=hack/refdocs/config.yaml --renderer=markdown --output-path=docs/reference/api.md
	go run ./hack/clidocs docs/reference/cli

.PHONY: catalog
catalog: ## Regenerate the embedded instance catalog (internal/catalog) from its pinned sources.
	cd hack/catalog && go run . -out ../../internal/catalog

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: verify
verify: manifests generate docs catalog fmt ## Regenerate everything (the references in docs/ too) and fail if the committed files are stale.
	@stale="$$(git diff --name-only; git ls-files --others --exclude-standard)"; \
	if [ -n "$$stale" ]; then \
	  echo "verify: generated or formatted files differ from what is committed; run 'make manifests generate docs fmt' and commit:"; \
	  echo "$$stale"; git --no-pager diff --stat; exit 1; fi
	@echo "verify: generated files are current"

# Three test binaries at a time on two cores: the three long packages (internal/render,
# test/chart, controllers) each wait on an API server and managers much of the time, and
# with two at a time the last of them ran alone (2 cores, -count=1: 6 min 15 s with -p 2,
# 5 min 16 s with -p 3).
TEST_PARALLEL ?= 3
# go test starts the test binaries in the order it is given the packages, and with ./...
# alone (import-path order) internal/render and test/chart, two of the three long ones,
# started last, when the short ones were done, and the run waited for them alone: the
# longest go first (each package is listed once), so the short ones fill in beside them.
SLOW_TEST_PACKAGES := ./test/chart ./internal/render ./controllers ./internal/cli
# The test binaries are linked without DWARF (-w): each of the 28 links anew every run,
# and the debug information no test reads was about 1.7 of its 11 CPU seconds.
TEST_LDFLAGS ?= -w

.PHONY: test
test: manifests generate fmt vet envtest helm ## Run every test against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null)" HELM=$(HELM) go test -p $(TEST_PARALLEL) -ldflags='$(TEST_LDFLAGS)' -timeout 20m $(SLOW_TEST_PACKAGES) ./... $(TESTFLAGS)

.PHONY: e2e
e2e: envtest ginkgo ## Run the end-to-end suite: real Karpenter, scheduler and controller manager on a simulated EC2.
	go vet -tags e2e ./test/e2e/ ./internal/harness/demo/
	@# The demo's smoke test (its own cluster) runs beside the suite, whose critical path
	@# is mostly waiting; its output follows the suite's.
	@export KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null)"; demo_log="$$(mktemp)"; \
	go test -tags e2e -timeout $(E2E_TIMEOUT) ./internal/harness/demo/ $(TESTFLAGS) >"$$demo_log" 2>&1 & demo=$$!; \
	suite=0; $(GINKGO) -p --procs $(E2E_PROCS) --tags e2e --timeout $(E2E_TIMEOUT) $(E2EFLAGS) ./test/e2e/ || suite=$$?; \
	smoke=0; wait $$demo || smoke=$$?; \
	echo "e2e: the demo's smoke test, run beside the suite:"; cat "$$demo_log"; rm -f "$$demo_log"; \
	test $$suite -eq 0 && test $$smoke -eq 0

# Classes for `make bench-scale` (500 is the issue's size), and extra arguments for it,
# e.g. BENCHFLAGS='-modes unthrottled -manager-env GOGC=50' (both comparisons by default:
# at the manager's default client QPS and unthrottled, each on a control plane of its own).
N ?= 100
BENCHFLAGS ?=

.PHONY: bench-scale
bench-scale: build envtest ## Measure the manager against a bare client (N classes), at the default client QPS and unthrottled, and print the figures.
	go build -o $(BIN)/benchscale ./hack/benchscale
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null)" $(BIN)/benchscale -n $(N) -poolsmith $(BIN)/poolsmith $(BENCHFLAGS)

.PHONY: chaos
chaos: envtest ## Run the fault suite: the manager killed, stopped, cut off from its API server and fought over (about 3 minutes).
	go vet -tags chaos ./test/chaos/
	CHAOS_KILLS=$(CHAOS_KILLS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_CONFLICT_DURATION=$(CHAOS_CONFLICT_DURATION) \
	  KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null)" go test -tags chaos -count=1 -v -timeout 6m ./test/chaos/ $(TESTFLAGS)

.PHONY: fuzz
fuzz: envtest ## Run each fuzz target for FUZZTIME.
	@for pkg in $$(go list ./...); do \
	  for t in $$(go test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz: $$pkg $$t for $(FUZZTIME)"; go test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME); \
	  done; done

.PHONY: bench
bench: ## Run the benchmarks and print their figures.
	go test ./... -run '^$$' -bench . -benchmem

##@ Build

.PHONY: build
build: ## Build bin/poolsmith.
	go build -o $(BIN)/poolsmith .

.PHONY: demo
demo: envtest ## Run Poolsmith, Karpenter and the samples on a local cluster and show what Karpenter launched.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh 2>/dev/null)" go run ./hack/demo

# The manager image. The Dockerfile is the source of truth; IMG's tag defaults to the
# chart's appVersion, the tag the chart installs.
IMG ?= ghcr.io/poolsmith/poolsmith:$(shell awk '/^appVersion:/ {gsub(/"/, "", $$2); print $$2}' charts/poolsmith/Chart.yaml)
CONTAINER_TOOL ?= docker

.PHONY: docker-build
docker-build: ## Build the manager image IMG with CONTAINER_TOOL (docker or podman).
	$(CONTAINER_TOOL) build -t $(IMG) .

##@ Tools

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd, kube-scheduler, kube-controller-manager and kubectl into bin/k8s (once).
	@hack/envtest.sh >/dev/null

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

# Helm v3 from the Go module proxy (hack/helm is its own module, like hack/controlplane).
# The ldflags are helm's own Makefile's: its version, and the Kubernetes version that
# `helm template` and `helm lint` assume (from the client-go it is built with).
.PHONY: helm
helm: $(HELM) ## Build the helm CLI into bin/ from hack/helm (once).
$(HELM): hack/helm/go.mod
	cd hack/helm && helm=$$(go list -m -f '{{.Version}}' helm.sh/helm/v3) && \
	  kminor=$$(go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2) && \
	  go build -trimpath -o $(HELM) -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$$helm \
	    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$kminor \
	    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$kminor" \
	  helm.sh/helm/v3/cmd/helm

.PHONY: crd-ref-docs
crd-ref-docs: $(CRD_REF_DOCS) ## Install crd-ref-docs (the API reference generator) into bin/.
$(CRD_REF_DOCS):
	GOBIN=$(BIN) go install github.com/elastic/crd-ref-docs@$(CRD_REF_DOCS_VERSION)

.PHONY: ginkgo
ginkgo: $(GINKGO) ## Install the ginkgo CLI into bin/ (at go.mod's version).
$(GINKGO):
	GOBIN=$(BIN) go install github.com/onsi/ginkgo/v2/ginkgo@$(GINKGO_VERSION)

.PHONY: clean
clean: ## Remove built binaries (keeps the control plane in bin/k8s).
	rm -f $(BIN)/poolsmith
