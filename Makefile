# capd-py — every target is safe to re-run; slow builds are cached under $(CAPD_PY_CACHE).
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
# Kubernetes versions: K8S_VERSION is the default of generated clusters, quickstart and the management
# plane (capd_py/api/versions.py DEFAULT_VERSION); `make binaries images` builds every version in
# K8S_VERSIONS (two adjacent minors, for upgrade tests; each cached per version). Give one version with
# `make images K8S_VERSIONS=v1.35.4`, or `make images K8S_VERSION=v1.35.4` (on the command line or in the
# environment, without K8S_VERSIONS: that version only).
K8S_VERSION ?= v1.34.4
ifneq ($(filter command line environment,$(origin K8S_VERSION)),)
K8S_VERSIONS ?= $(K8S_VERSION)
endif
K8S_VERSIONS ?= v1.34.4 v1.35.4
# Upstream Cluster API: CLUSTERCTL_VERSION is the release capd-py follows (its managers, `make upstream`, and the
# clusterctl most tests use); CLUSTERCTL_V1_14 renders upstream v1.14's Dev* templates in the e2e tier.
# `make clusterctl` builds every version in CLUSTERCTL_VERSIONS (each cached per version); one version:
# `make clusterctl CLUSTERCTL_VERSIONS=v1.14.2`.
# `make conformance`: upstream's own e2e suite (sigs.k8s.io/cluster-api/test/e2e) at CONFORMANCE_VERSION against
# capd-py; CONFORMANCE_FOCUS / CONFORMANCE_SKIP are ginkgo regular expressions (docs/conformance.md).
CONFORMANCE_VERSION ?= v1.14.2
CLUSTERCTL_VERSION ?= v1.13.6
# v1.14's clusterctl at the suite's release: `make e2e-suite` builds it in the suite's module, and `make upstream`
# v1.13's in the managers' module, sharing their compiled packages (hack/build-clusterctl.sh MODULE_DIR)
CLUSTERCTL_V1_14 ?= $(CONFORMANCE_VERSION)
CLUSTERCTL_VERSIONS ?= $(CLUSTERCTL_VERSION) $(CLUSTERCTL_V1_14)
CLUSTER_AUTOSCALER_VERSION ?= 1.35.2
# the admission differential's inputs in `make conformance` (capd_py/testing/admission_oracle.py; `make test` runs 500)
ADMISSION_INPUTS ?= 5000
CERT_MANAGER_VERSION ?= v1.21.1
export CAPD_PY_CACHE ?= $(HOME)/.cache/capd-py
# The suite runs in TEST_WORKERS pytest-xdist processes (tests/conftest.py: tests sharing a cluster go to one worker
# together; a `host_exclusive` test runs alone; CAPD_PY_E2E_WORKERS=2 of them go on into the e2e tier, tests/
# worker_units.py). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 4
PYTEST := $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup
# The Go compiler with GOGC=400 (its own garbage collector runs less often): a cold compile of kubectl took 0.82x the
# CPU of GOGC=100 with the same peak memory (~1 GB, the linker's), GOGC=off no better (bench/README.md, issue 40).
# For the build targets only: the Go programs the tests run keep their defaults.
BUILD_GOGC ?= 400
builds images binaries clusterctl upstream e2e-suite cert-manager cluster-autoscaler parity-corpus: export GOGC := $(BUILD_GOGC)
# This sandbox refuses --privileged; real machines can use CAPD_PY_PRIVILEGED_MODE=privileged.
export CAPD_PY_PRIVILEGED_MODE ?= $(shell bash hack/privilege-mode.sh 2>/dev/null || echo privileged)

.PHONY: e2e-suite cert-manager cert-manager-manifests-check conformance venv docker builds images images-check binaries clusterctl upstream test-upstream parity-corpus cluster-autoscaler test-autoscaler test-cert-manager test test-unit test-integration test-e2e lint quickstart clean-clusters

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

docker:
	bash hack/ensure-docker.sh

# Every build step goes through hack/timed.sh: its time on stderr and in $(CAPD_PY_CACHE)/build-times.tsv.
binaries:
	@set -e; for v in $(K8S_VERSIONS); do bash hack/timed.sh "kubernetes $$v" bash hack/build-k8s.sh $$v; \
	  bash hack/timed.sh "addons $$v" bash hack/build-addons.sh $$v; done

# The Debian base image (debootstrap: mostly downloads and disk) is made beside the Go compiles, which keep both
# cores busy on their own; its output is shown once it is done.
images: images-check docker
	@set -e; log=$$(mktemp); bash hack/timed.sh "base image" bash images/base/build.sh >/dev/null 2>"$$log" & base=$$!; \
	$(MAKE) --no-print-directory binaries || { kill $$base 2>/dev/null; exit 1; }; \
	if ! wait $$base; then cat "$$log" >&2; exit 1; fi; cat "$$log" >&2; rm -f "$$log"; \
	for v in $(K8S_VERSIONS); do echo "== components of Kubernetes $$v" >&2; \
	  CAPD_PY_COMPONENTS_ONLY=1 bash hack/timed.sh "component images $$v" bash images/build.sh $$v; done; \
	pids=(); logs=(); for v in $(K8S_VERSIONS); do l=$$(mktemp); logs+=("$$l"); \
	  { echo "== node image of Kubernetes $$v"; CAPD_PY_UPGRADE_PEERS="$(K8S_VERSIONS)" \
	    bash hack/timed.sh "node image $$v" bash images/build.sh $$v; } >"$$l" 2>&1 & pids+=($$!); done; \
	rc=0; for pid in "$${pids[@]}"; do wait $$pid || rc=1; done; cat "$${logs[@]}" >&2; rm -f "$${logs[@]}"; exit $$rc

# CAPD_PY_K8S_BIN_DIR (official release binaries, images/build.sh) holds one version's binaries
images-check:
	@if [[ -n "$${CAPD_PY_K8S_BIN_DIR:-}" && $(words $(K8S_VERSIONS)) -ne 1 ]]; then \
	  echo "CAPD_PY_K8S_BIN_DIR holds one version's binaries: name it, make images K8S_VERSIONS=<version>" >&2; exit 1; fi

# Upstream clusterctl (from the Go module proxy, cached): the e2e tier runs v1.13's `describe cluster` / `get
# kubeconfig` against the capd-py management cluster and renders upstream's templates with v1.13 and v1.14
# (docs/clusterctl.md has the measured build times).
clusterctl:
	@for v in $(CLUSTERCTL_VERSIONS); do nice -n 10 bash hack/timed.sh "clusterctl $$v" bash hack/build-clusterctl.sh $$v || exit 1; done

# Upstream Cluster API's managers (core, kubeadm bootstrap, kubeadm control plane, CAPD = Docker + in-memory provider)
# from the Go module proxy, cached in $(CAPD_PY_CACHE)/upstream/<version>/ (hack/build-upstream.sh; docs/upstream.md).
# Run as host processes by capd_py/testing/upstream_managers.py; `builds` (so `make test`) builds them.
upstream:
	nice -n 10 bash hack/timed.sh "upstream managers $(CLUSTERCTL_VERSION)" bash hack/build-upstream.sh $(CLUSTERCTL_VERSION)

# the smoke test, then interop both ways on real workload clusters (tests/e2e/test_upstream_interop.py, issue 28 item 2)
test-upstream: venv images upstream
	$(VENV)/bin/pytest -m upstream -q -s --durations=0 tests/integration/test_upstream_managers.py tests/e2e/test_upstream_interop.py

# The template + variable conformance corpus (tests/fixtures/parity/, committed: the tests need no Go): a Go program
# runs upstream's text/template + sprig and cluster-api's internal/topology/variables on thousands of seeded
# cases (hack/parity/README.md). Build cached in $CAPD_PY_CACHE/parity/ (~1 min cold), generation ~20 s.
parity-corpus:
	nice -n 10 bash hack/parity/run.sh

# Upstream cluster-autoscaler (clusterapi provider only, ~3.7 min cold, cached) for tests/e2e/test_autoscaler.py. The
# Go module proxy does not serve k8s.io/autoscaler/cluster-autoscaler: give a checkout of kubernetes/autoscaler at
# tag cluster-autoscaler-$(CLUSTER_AUTOSCALER_VERSION) as CAPD_PY_AUTOSCALER_SRC (hack/build-cluster-autoscaler.sh).
# Not a prerequisite of `test` for that reason, and its test is left out of the default run (pytest -m autoscaler).
cluster-autoscaler:
	nice -n 10 bash hack/build-cluster-autoscaler.sh $(CLUSTER_AUTOSCALER_VERSION)

test-autoscaler: venv images cluster-autoscaler
	$(VENV)/bin/pytest -m autoscaler -q -s tests/integration/test_autoscaler_envtest.py tests/e2e/test_autoscaler.py

# Upstream's e2e suite compiled from the Go module proxy (+ kustomize, its data and config), cached in
# $(CAPD_PY_CACHE)/conformance/<version>/.
e2e-suite:
	nice -n 10 bash hack/timed.sh "upstream e2e suite $(CONFORMANCE_VERSION)" bash hack/build-e2e-suite.sh $(CONFORMANCE_VERSION)

# cert-manager built from source (controller, webhook, cainjector images tagged quay.io/jetstack/cert-manager-*, and
# the release's cert-manager.yaml; ~4 min cold, cached; a cached run re-creates missing images in seconds) for
# upstream `clusterctl init` on capd-py management clusters (capd_py/testing/cert_manager.py, docs/clusterctl.md).
# Its binaries' main packages are nested modules no Go module proxy serves: they (and the modules the proxy refuses)
# come from the bundle in hack/third_party (CAPD_PY_CERT_MANAGER_SRC names another). Built by `builds` (the default
# run's upstream PR-blocking spec needs it); its own test is left out of the default run (pytest -m cert_manager).
cert-manager: docker
	nice -n 10 bash hack/timed.sh "cert-manager $(CERT_MANAGER_VERSION)" bash hack/build-cert-manager.sh $(CERT_MANAGER_VERSION)

# cert-manager's static manifests rendered again with helm (compiled from source), compared with the committed pair
# the build uses (hack/third_party/cert-manager-<version>-manifests.tar.gz); CAPD_PY_CERT_MANAGER_RENDER=write
# bash hack/build-cert-manager.sh rewrites it. Into a cache of its own: the default one keeps its build.
cert-manager-manifests-check: docker
	@d=$$(mktemp -d); CAPD_PY_CACHE=$$d CAPD_PY_CERT_MANAGER_RENDER=check nice -n 10 bash hack/build-cert-manager.sh \
	  $(CERT_MANAGER_VERSION); rc=$$?; chmod -R u+w "$$d"; rm -rf "$$d"; exit $$rc

test-cert-manager: venv images clusterctl cert-manager
	CAPD_PY_CERT_MANAGER_VERSION=$(CERT_MANAGER_VERSION) $(VENV)/bin/pytest -m cert_manager -q -s tests/e2e/test_cert_manager.py

# Upstream's e2e suite against a capd-py management cluster made for it (capd_py/testing/conformance.py); the table
# of results goes to stdout and $(CAPD_PY_CACHE)/conformance/last-report.md. Not part of `make test` (hours).
conformance: venv images e2e-suite cert-manager upstream
	mkdir -p $(CAPD_PY_CACHE)/conformance
	$(VENV)/bin/python -m capd_py.testing.admission_oracle --inputs $(ADMISSION_INPUTS) \
	  --report $(CAPD_PY_CACHE)/conformance/admission-report.md > /dev/null || admission_rc=$$?; \
	CAPD_PY_CONFORMANCE_VERSION=$(CONFORMANCE_VERSION) $(VENV)/bin/python -m capd_py.testing.conformance \
	  --report $(CAPD_PY_CACHE)/conformance/last-report.md && exit $${admission_rc:-0}

lint: venv
	$(VENV)/bin/ruff check capd_py tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python hack/check_deps.py

test-unit: venv
	$(PYTEST) -m "unit and not autoscaler and not cert_manager" -q -rfEs --tier-report

test-integration: venv images upstream
	$(PYTEST) -m "integration and not autoscaler and not cert_manager" -q -rfEs --tier-report

test-e2e: venv images upstream e2e-suite cert-manager clusterctl
	$(PYTEST) -m "e2e and not autoscaler and not cert_manager" -q -rfEs --tier-report

# What the tests need built before they start, in two chains side by side: the Kubernetes chain (`images`: compiles,
# links, downloads, debootstrap) and upstream's managers with clusterctl v1.13 (niced, one module: clusterctl shares
# its compiled packages); their output is shown when they are done. Upstream's e2e suite, with clusterctl v1.14 in its
# module, is built beside the tests (`test`). A cold build is CPU-bound (docs/ENVIRONMENT.md
# "Session 27": ~2 480 CPU-s then; "Session 28"). Each step is timed (hack/timed.sh).
builds: docker
	@set -e; log=$$(mktemp); $(MAKE) --no-print-directory upstream clusterctl CLUSTERCTL_VERSIONS=$(CLUSTERCTL_VERSION) \
	  >"$$log" 2>&1 & side=$$!; \
	if ! $(MAKE) --no-print-directory images; then kill $$side 2>/dev/null; cat "$$log" >&2; exit 1; fi; \
	if ! wait $$side; then cat "$$log" >&2; exit 1; fi; cat "$$log" >&2; rm -f "$$log"

# The one test command: lint, then every tier. cert-manager (~300 CPU-s cold; only upstream's quick-start spec needs
# it) and upstream's e2e suite with clusterctl v1.14 (~310 CPU-s cold; the quick-start spec and the tests rendering
# upstream v1.14's templates need them) build beside lint, the builds and the tests at the lowest CPU weight, in the
# time those leave idle (hack/late-build.sh, capd_py/testing/late_builds.py), from the start of the run so that they
# are done sooner; the tests that need them run once they are done; their logs are shown at the end, as the builds'
# are. Lint or the builds failing stop them.
LATE_BUILDS = e2e-suite cert-manager
test: docker
	@for b in $(LATE_BUILDS); do bash hack/late-build.sh start $$b $(MAKE) --no-print-directory $$b || exit 1; done
	@$(MAKE) --no-print-directory lint builds || { bash hack/late-build.sh stop $(LATE_BUILDS); exit 1; }
	trap 'bash hack/late-build.sh finish $(LATE_BUILDS) || exit 1' EXIT; \
	CAPD_PY_TIER_REPORT=$${CAPD_PY_TIER_REPORT:-$(CAPD_PY_CACHE)/test-report.json} $(PYTEST) -q -rfEs --tier-report

quickstart: venv
	$(MAKE) --no-print-directory images K8S_VERSIONS=$(K8S_VERSION)
	$(VENV)/bin/capd-py quickstart

clean-clusters: venv
	-$(VENV)/bin/capd-py delete all
