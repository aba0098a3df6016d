# nodepulse — run `make help` for the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Pinned tool versions; installed into .tmp/bin by `make tools`.
BUF_VERSION         := v1.75.0
STATICCHECK_VERSION := v0.8.2
GRPCURL_VERSION     := v1.9.4
# kubectl for the Kubernetes-API tests, built from tests/kubectl (its own module, outside go.work).
KUBECTL_VERSION     := v1.37.2
# Deployment checks (make check-deploy): promtool for the alert rules, helm for the chart.
PROMTOOL_VERSION    := v0.316.0
HELM_VERSION        := v3.22.0

TOOLS   := $(CURDIR)/.tmp/bin
BUF     := $(TOOLS)/buf
export PATH := $(TOOLS):$(PATH)
export GOFLAGS ?= -buildvcs=false

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/nodepulse/nodepulse/services/version.Version=$(VERSION)
# Every Go module of the workspace (go test ./... does not cross go.work modules).
MODULES := $(shell go list -m -f '{{.Dir}}')
BINARIES := etcd collector monitor reporter nodepulse localstack bench fleetsim simbench robustness scaleout

.PHONY: help
help: ## show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  \033[36m%-14s\033[0m %s\n",$$1,$$2}'

.PHONY: tools
tools: $(BUF) $(TOOLS)/staticcheck $(TOOLS)/grpcurl ## install pinned buf, staticcheck, grpcurl into .tmp/bin
$(BUF):
	GOBIN=$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
$(TOOLS)/grpcurl:
	GOBIN=$(TOOLS) go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

.PHONY: deploy-tools
deploy-tools: $(TOOLS)/promtool $(TOOLS)/helm ## install pinned promtool and helm into .tmp/bin (for check-deploy)
$(TOOLS)/promtool:
	GOBIN=$(TOOLS) go install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
$(TOOLS)/helm:
	GOBIN=$(TOOLS) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

HELM_CHART := deploy/helm/nodepulse
# Non-default values: every optional part on (ServiceMonitor, PrometheusRule,
# cert-manager), another monitoring namespace, fixed collector replicas.
HELM_TEST_VALUES := $(HELM_CHART)/ci/all-on-values.yaml

.PHONY: check-deploy
check-deploy: $(TOOLS)/promtool $(TOOLS)/helm bin/kubectl ## alert rules (promtool check + test), helm lint/template, kustomize builds, and the manifest tests that decode it all into k8s.io/api types
	$(TOOLS)/promtool check rules deploy/prometheus/alerts.yml
	$(TOOLS)/promtool test rules deploy/prometheus/alerts_test.yml
	$(TOOLS)/helm lint --strict $(HELM_CHART)
	$(TOOLS)/helm lint --strict $(HELM_CHART) -f $(HELM_TEST_VALUES)
	$(TOOLS)/helm template nodepulse $(HELM_CHART) --namespace nodepulse >/dev/null
	$(TOOLS)/helm template nodepulse $(HELM_CHART) --namespace nodepulse -f $(HELM_TEST_VALUES) >/dev/null
	@for d in deploy/kubernetes/base deploy/kubernetes/overlays/*/; do echo "kubectl kustomize $$d"; bin/kubectl kustomize $$d >/dev/null; done
	cd tests && NODEPULSE_REQUIRE_DEPLOY_TOOLS=1 HELM=$(TOOLS)/helm go test -count=1 ./manifests/

.PHONY: kubectl
kubectl: bin/kubectl ## build an unmodified kubectl $(KUBECTL_VERSION) from the k8s.io/kubectl module into bin/kubectl (tests use it)
bin/kubectl: tests/kubectl/go.mod tests/kubectl/go.sum tests/kubectl/main.go
	@mkdir -p bin
	cd tests/kubectl && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$(KUBECTL_VERSION) -X k8s.io/client-go/pkg/version.gitVersion=$(KUBECTL_VERSION)' -o $(CURDIR)/bin/kubectl .

.PHONY: build
build: ## build every binary into bin/ (static, CGO_ENABLED=0)
	@mkdir -p bin
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/etcd ./deploy/etcd
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/collector ./collector/cmd/collector
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/monitor ./monitor/cmd/monitor
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/reporter ./reporter/cmd/reporter
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/nodepulse ./monitor/cmd/nodepulse
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/localstack ./tests/cmd/localstack
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/bench ./tests/cmd/bench
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/fleetsim ./tests/cmd/fleetsim
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/simbench ./tests/cmd/simbench
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/robustness ./tests/cmd/robustness
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/scaleout ./tests/cmd/scaleout

.PHONY: run
run: build ## start etcd, collector, monitor and a reporter for this machine; Ctrl-C stops all
	bin/localstack --bin-dir bin

COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo 'docker compose' || echo docker-compose)
# One image tag for `make images`, `make up`, docker-compose.yml and the docs:
# NODEPULSE_IMAGE_TAG (default dev), read from the environment by make and by
# compose alike, so `docker compose up -d` after `make images` finds the
# images it just built and never tries a registry.
NODEPULSE_IMAGE_TAG ?= dev
export NODEPULSE_IMAGE_TAG
# TIMERS=short layers deploy/compose/short-timers.yml (grace period 8s).
TIMERS ?=
COMPOSE_FILES := -f docker-compose.yml $(if $(filter short,$(TIMERS)),-f deploy/compose/short-timers.yml)

.PHONY: images
images: ## build container images nodepulse/{etcd,collector,monitor,reporter}:$(NODEPULSE_IMAGE_TAG) (FROM scratch, no registry)
	deploy/build-images.sh $(NODEPULSE_IMAGE_TAG)

.PHONY: up
up: images ## start the docker compose stack (PLAINTEXT dev mode, ports on 127.0.0.1); TIMERS=short for an 8s grace period
	$(COMPOSE) $(COMPOSE_FILES) up -d
	@echo "try: grpcurl -plaintext 127.0.0.1:9091 nodepulse.node.v1.NodeService/ListNodes"

.PHONY: down
down: ## stop the docker compose stack and delete its etcd volumes
	$(COMPOSE) $(COMPOSE_FILES) down -v --remove-orphans

.PHONY: bench
bench: build ## scale benchmark: 100,000 nodes vs the Kubernetes write path; report in .run/bench/ (PROFILE=1 for profiles)
	bin/bench --bin-dir bin --nodes=100000 --connections=1000 --wait-load=4 --wait-load-max=5m

.PHONY: bench-quick
bench-quick: build ## scale benchmark smoke test (CI): 3,000 nodes, < 2 min, fails only on broken plumbing
	bin/bench --bin-dir bin --quick --out .run/bench/quick

# make robustness: DURATION of random faults (plus ~30 s of start-up and settling), NODES simulated
# nodes, SEED of the schedule (0: random, printed first). docs/robustness.md.
DURATION ?= 10m
NODES    ?= 2000
SEED     ?= 0
.PHONY: robustness
robustness: build ## randomized fault suite, ~11 min: DURATION=10m of faults at NODES=2000 (SEED=N replays a schedule)
	bin/robustness --bin-dir bin --out .run/robustness --duration $(DURATION) --nodes $(NODES) --seed $(SEED)

.PHONY: bench-scaleout
bench-scaleout: build ## scale-out run: 3 collectors, 2 monitors, etcd ×3, 15,000 nodes at one connection each; kill and restart a collector; nodes per collector, CPU and memory per node to .run/scaleout/ (~10 min)
	bin/scaleout --bin-dir bin

.PHONY: bench-scaleout-quick
bench-scaleout-quick: build ## scale-out smoke test (CI): 1,500 nodes, the same stages short, < 2 min, fails only on broken plumbing
	bin/scaleout --bin-dir bin --quick --out .run/scaleout/quick

.PHONY: test
test: kubectl ## run every test of every module (unit, store conformance, integration, e2e)
	@for m in $(MODULES); do echo "== $$m"; (cd $$m && go test -count=1 -timeout 20m ./...) || exit 1; done

.PHONY: test-short
test-short: ## unit tests only (-short skips etcd, processes and Docker)
	@for m in $(MODULES); do (cd $$m && go test -short -count=1 ./...) || exit 1; done

FUZZTIME ?= 10s
.PHONY: fuzz
fuzz: ## run every Go fuzz target for FUZZTIME each (default 10s); each keeps its seed corpus and regressions committed in its package's testdata/fuzz/<target>
	@git grep -l '^func Fuzz' -- '*_test.go' | while read -r f; do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
			echo "== $$fn ($$(dirname "$$f"))"; \
			test -n "$$(git ls-files "$$(dirname "$$f")/testdata/fuzz/$$fn")" || { echo "$$fn: no seed corpus committed in $$(dirname "$$f")/testdata/fuzz/$$fn"; exit 1; }; \
			(cd "$$(dirname "$$f")" && go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) .) || exit 1; \
		done; \
	done

.PHONY: test-race
test-race: ## unit tests with the race detector
	@for m in $(MODULES); do (cd $$m && go test -race -short -count=1 ./...) || exit 1; done

# gen/openapi: OpenAPI definitions of the k8s.io/api types the monitor's Kubernetes
# API serves, written by kube-openapi's openapi-gen (pinned by the tool line in
# gen/go.mod). Run from gen/; OPENAPI_GEN takes --output-dir. The API rule
# violations known in k8s.io/api go to /dev/null: a report file (not "-") keeps
# them from failing generation.
OPENAPI_PKGS := \
	k8s.io/api/core/v1 k8s.io/api/coordination/v1 k8s.io/api/policy/v1 k8s.io/api/policy/v1beta1 \
	k8s.io/api/apps/v1 k8s.io/api/autoscaling/v1 k8s.io/api/authorization/v1 k8s.io/api/authentication/v1 \
	k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/api/resource \
	k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version
OPENAPI_GEN := go tool openapi-gen --output-pkg github.com/nodepulse/nodepulse/gen/openapi \
	--output-file zz_generated.openapi.go --go-header-file openapi/header.txt --report-filename /dev/null

.PHONY: gen
gen: $(BUF) ## regenerate gen/ from proto/ (buf) and gen/openapi from k8s.io/api (openapi-gen)
	find gen -name '*.pb.go' -delete
	$(BUF) generate
	cd gen && $(OPENAPI_GEN) --output-dir openapi $(OPENAPI_PKGS)

.PHONY: check-gen
check-gen: $(BUF) ## fail when gen/ is stale against proto/ or gen/openapi against k8s.io/api
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(BUF) generate -o $$tmp; \
	diff -r -x go.mod -x go.sum -x openapi $$tmp/gen gen >/dev/null || { echo "gen/ is stale: run 'make gen' and commit"; diff -r -x go.mod -x go.sum -x openapi $$tmp/gen gen | head -20; exit 1; }; \
	(cd gen && $(OPENAPI_GEN) --output-dir $$tmp/openapi $(OPENAPI_PKGS)); \
	diff -q $$tmp/openapi/zz_generated.openapi.go gen/openapi/zz_generated.openapi.go >/dev/null || { echo "gen/openapi is stale: run 'make gen' and commit"; diff -u gen/openapi/zz_generated.openapi.go $$tmp/openapi/zz_generated.openapi.go | head -20; exit 1; }; \
	echo "gen/ is up to date"

.PHONY: lint
lint: $(BUF) $(TOOLS)/staticcheck ## gofmt, go vet, staticcheck, buf lint, buf format, references (.ci/check-refs), SPDX headers (.ci/check-headers)
	.ci/check-refs
	.ci/check-headers
	@bad=$$(git ls-files '*.go' | grep -v '^gen/' | xargs gofmt -l); [ -z "$$bad" ] || { echo "gofmt needed: $$bad"; exit 1; }
	@for m in $(MODULES); do (cd $$m && go vet ./... && $(TOOLS)/staticcheck ./...) || exit 1; done
	$(BUF) lint
	$(BUF) format -d --exit-code

.PHONY: breaking
breaking: $(BUF) ## buf breaking against main (wire compatibility for lagging reporters)
	$(BUF) breaking --against '.git#branch=main'

.PHONY: tidy
tidy: ## go mod tidy in every module
	@for m in $(MODULES); do (cd $$m && go mod tidy); done
	cd tests/kubectl && GOWORK=off go mod tidy

.PHONY: certs
certs: ## create a development CA and certificates in .tmp/certs, and .tmp/certs/kubeconfig for kubectl and bin/nodepulse
	go run ./monitor/cmd/nodepulse certs init --dir .tmp/certs --nodes "$$(hostname | tr A-Z a-z)" --operators admin
	@# nodepulse-local (current): make run and docker compose, both PLAINTEXT on 127.0.0.1.
	@# nodepulse-local-mtls: a stack started with these certificates (monitor --grpc.tls-*).
	go run ./monitor/cmd/nodepulse kubeconfig --kubeconfig .tmp/certs/kubeconfig --context nodepulse-local-mtls --set-current=false \
		--server https://127.0.0.1:9093 --grpc-server 127.0.0.1:9091 \
		--ca .tmp/certs/ca.crt --cert .tmp/certs/operator-admin.crt --key .tmp/certs/operator-admin.key
	go run ./monitor/cmd/nodepulse kubeconfig --kubeconfig .tmp/certs/kubeconfig --context nodepulse-local \
		--server http://127.0.0.1:9093 --grpc-server 127.0.0.1:9091
	@echo "try: kubectl --kubeconfig .tmp/certs/kubeconfig get nodes   (and: bin/nodepulse --kubeconfig .tmp/certs/kubeconfig get nodes)"

.PHONY: clean
clean: ## remove build outputs and local run data
	rm -rf bin .run
