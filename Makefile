# pctk: the two commands that do all the set-up on a fresh Debian 12 machine, as root:
#   make demo   start the local twin from a preset, run the main job, print the results
#   make test   pass the tests (on the real twin)
# Both install what is missing (apt packages, a virtual environment) and are idempotent.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PCTK := $(VENV)/bin/pctk
# Without an NVIDIA GPU install the CPU build of torch first: a plain `torch` from PyPI is the
# multi-GB CUDA build. Override TORCH_CPU_SPEC / TORCH_INDEX_URL for other machines
# (e.g. TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu).
TORCH_CPU_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
APT_PACKAGES := slurm-wlm slurmdbd munge mariadb-server mariadb-client python3-venv fio \
                iproute2 gcc make shellcheck chromium prometheus prometheus-node-exporter \
                libmunge-dev libmariadb-dev
CONSTRAINTS := constraints.txt
DEMO_DIR ?= out/demo
PYTEST_ARGS ?=
# four workers: the CPU-measuring benchmarks one after the other on one, the twins that wait on
# Slurm's clocks on two others, the session twin's other modules on the fourth, the modules
# without a twin wherever a worker is free (tests/conftest.py); PYTEST_WORKERS=0 runs
# everything in one process
PYTEST_WORKERS ?= 4
# the Slurm-facing tests on TEST_SLURM (below) run beside the suite on this many workers
LEG_WORKERS ?= 2
XDIST = --dist loadgroup --no-loadscope-reorder
# make demo SLURM=24.11: the twin runs that Slurm release (built once, about 3-5 minutes, and kept:
# `pctk local image list`); empty: as `pctk local up` chooses
SLURM ?=
# make test runs the Slurm-facing tests (marker slurm_matrix) a second time on a twin of this
# newer release, beside the whole suite on the system's Slurm; TEST_SLURM= skips that leg
TEST_SLURM ?= 24.11

.PHONY: help deps venv test check lint demo twin-up twin-down clean

help:
	@echo "make demo   - start the local Slurm twin, run the main job, print the results"
	@echo "make test   - run the tests (on the real twin)"
	@echo "make check  - the quick tier: lint and the tests that need no Slurm twin (minutes)"
	@echo "make lint   - ruff, mypy, shellcheck and the docs site (mkdocs --strict)"
	@echo "make deps   - install the Debian packages (root)"
	@echo "make venv   - create $(VENV) with pctk and its dependencies"
	@echo "make clean  - stop the default twin, remove $(VENV) and out/"

# Debian packages: only the missing ones, so a second run is quick and needs no network.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "pctk: missing Debian packages:$$missing; run 'sudo make deps'" >&2; exit 2; fi; \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null \
	    || { echo "pctk: apt-get install failed for:$$missing" >&2; exit 2; }; \
	fi

# constraints.txt pins every other package to the versions the tests pass with; a change to it
# or to pyproject.toml reinstalls. The dev extra is everything: the head node's dependencies,
# the node extra (torch, NVML) and the tools the tests use.
$(VENV)/.pctk-installed: pyproject.toml $(CONSTRAINTS)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if ! command -v nvidia-smi >/dev/null 2>&1; then \
	  $(PY) -m pip install -q $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) "$(TORCH_CPU_SPEC)"; \
	fi
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e '.[dev]'
	@touch $@

venv: $(VENV)/.pctk-installed

# The Slurm-facing tests on TEST_SLURM run beside the whole suite (they mostly wait on Slurm's
# clocks: about 1 CPU-minute in 8 minutes), once its build (once per machine, then a no-op,
# at the lowest priority) is done: their twin numbers its jobs from 6001, so its jobs' ports
# differ from the suite's (toolkit/local/plan.py). Their output is kept in
# out/slurm-matrix.log and shown after the suite's. Ctrl-C or SIGTERM stops both legs (each
# pytest tears its twins down).
test: deps venv
ifneq ($(TEST_SLURM),)
	@mkdir -p out; rm -f out/slurm-matrix.log; \
	setsid bash -c 'nice -n 19 "$$1" local image build "$$2" > out/slurm-build.log 2>&1 || \
	  { echo "pctk: building Slurm $$2 failed:"; tail -3 out/slurm-build.log; exit 3; }; \
	  PCTK_SLURM="$$2" exec env --default-signal=INT "$$3" -m pytest -q -n "$$4" \
	  $(XDIST) -m slurm_matrix --durations=10 $$5' leg \
	  $(PCTK) $(TEST_SLURM) $(PY) $(LEG_WORKERS) "$(PYTEST_ARGS)" > out/slurm-matrix.log 2>&1 & \
	leg=$$!; \
	trap 'kill -INT -- -$$leg 2>/dev/null; wait $$leg; exit 130' INT TERM HUP; \
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) $(XDIST) --durations=25 $(PYTEST_ARGS); rc=$$?; \
	wait $$leg; leg_rc=$$?; \
	echo "== the Slurm-facing tests again, on Slurm $(TEST_SLURM) (beside the suite)"; \
	cat out/slurm-matrix.log; \
	[ $$leg_rc = 5 ] && leg_rc=0; \
	[ $$leg_rc = 3 ] && exit 2; \
	[ $$rc = 0 ] || exit $$rc; \
	exit $$leg_rc
else
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) $(XDIST) --durations=25 $(PYTEST_ARGS)
endif

# The inner loop: ruff, mypy and every test module that neither asks for the twin nor starts
# one (marker `twin`, set by tests/conftest.py from the module's fixtures and text), less the
# few long ones (marker `slow`: torch ranks, a wheel install, a browser). `make test` remains
# what proves the product.
check: venv
	$(VENV)/bin/ruff check toolkit benchmarks tests
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) -m "not twin and not slow" --durations=10 $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check toolkit benchmarks tests
	$(VENV)/bin/mypy
	shellcheck sbatch/*
	$(VENV)/bin/mkdocs build --strict --site-dir out/site

demo: deps venv
	$(PCTK) demo --run-dir $(DEMO_DIR) $(if $(SLURM),--slurm $(SLURM))

twin-up: deps venv
	$(PCTK) local up

twin-down: venv
	$(PCTK) local down

clean:
	-@test -x $(PCTK) && $(PCTK) local down >/dev/null 2>&1 || true
	rm -rf $(VENV) out
