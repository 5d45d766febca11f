# capd-py — every target is safe to re-run; slow builds are cached under $(CAPD_PY_CACHE).
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
K8S_VERSION ?= v1.34.4
CLUSTERCTL_VERSION ?= v1.13.6
export CAPD_PY_CACHE ?= $(HOME)/.cache/capd-py
# This sandbox refuses --privileged; real machines can use CAPD_PY_PRIVILEGED_MODE=privileged.
export CAPD_PY_PRIVILEGED_MODE ?= $(shell bash hack/privilege-mode.sh 2>/dev/null || echo privileged)

.PHONY: venv docker images binaries clusterctl test test-unit test-integration test-e2e lint quickstart clean-clusters

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

docker:
	bash hack/ensure-docker.sh

binaries:
	bash hack/build-k8s.sh $(K8S_VERSION)
	bash hack/build-addons.sh $(K8S_VERSION)

images: docker binaries
	bash images/build.sh $(K8S_VERSION)

# Upstream clusterctl (go install from the Go module proxy, ~3-9 min cold, cached): the e2e tier runs its
# `describe cluster` / `get kubeconfig` against the capd-py management cluster.
clusterctl:
	nice -n 10 bash hack/build-clusterctl.sh $(CLUSTERCTL_VERSION)

lint: venv
	$(VENV)/bin/ruff check capd_py tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test-unit: venv
	$(VENV)/bin/pytest -m unit -q

test-integration: venv images
	$(VENV)/bin/pytest -m integration -q

test-e2e: venv images clusterctl
	$(VENV)/bin/pytest -m e2e -q

# The one test command: lint, then every tier.
test: lint images clusterctl
	$(VENV)/bin/pytest -q -rs

quickstart: venv images
	$(VENV)/bin/capd-py quickstart

clean-clusters: venv
	-$(VENV)/bin/capd-py delete all
