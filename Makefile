# inductor-lens: set-up, demo and tests. `make demo` and `make test` install what they need.
#
# Python environment: the active virtualenv or conda env when there is one (a GPU user's own torch is
# kept), otherwise ./.venv, created with access to the system's packages (a system-wide torch is kept
# too). Only where no torch is importable at all is the CPU build torch==2.13.0+cpu installed, from
# PyTorch's CPU wheel index, so pip never pulls the CUDA build (and its ~20 CUDA packages) from PyPI
# onto a machine that has no GPU. Where that index cannot be reached (checked first, in a few seconds),
# the same pin is installed from pip's configured sources (a local wheel, a mirror); failing that, only a
# machine with an NVIDIA GPU (nvidia-smi) gets torch==2.13.0 from them, and any other stops with a one-line error.
# `make test` also installs the real-model corpus's libraries (the `real` extra: transformers, pinned)
# with every package already installed held at its version (a constraints file from `pip freeze`).
# `make test` runs two jobs side by side: the whole suite on the environment above, and the parsers, the golden pages
# and the CPU compiles of the samples and the real corpus on the newest torch, in an environment of its own
# (./.venv-torch-newest: torch==$(TORCH_NEWEST)+cpu from PyTorch's CPU index, or the same release from pip's
# configured sources where that index cannot be reached).

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
TRITON_VERSION ?= 3.7.1
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PROBE_TIMEOUT ?= 5
DEMO_MODEL ?= samples/mlp.py
PYTEST_ARGS ?=
# The newest torch this project is tested on, in its own environment (the second job of `make test`).
TORCH_NEWEST ?= 2.14.1
TRITON_NEWEST ?= 3.8.0
NEWEST_VENV ?= .venv-torch-newest
NEWEST_PY := $(NEWEST_VENV)/bin/python
NEWEST_TESTS ?= tests/unit tests/golden tests/e2e/test_compile_cpu.py tests/e2e/test_real_models.py tests/e2e/test_custom_op_cpu.py \
	tests/e2e/test_cache_hits_cpu.py tests/e2e/test_gpu_preview.py

ifdef VIRTUAL_ENV
PY := $(VIRTUAL_ENV)/bin/python
else ifdef CONDA_PREFIX
PY := $(CONDA_PREFIX)/bin/python
else
PY := $(VENV)/bin/python
endif

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
STAMP := .make

.PHONY: demo test test-main test-main-later test-newest test-fast typecheck install install-test system-deps graphviz apt lint update-golden clean help

help:
	@echo "make demo    compile $(DEMO_MODEL) and write an HTML report (installs what it needs)"
	@echo "make test    run the whole test suite (installs what it needs, Chromium and Graphviz included)"
	@echo "             on the installed torch, then the parsers and CPU compiles on torch $(TORCH_NEWEST)"
	@echo "make test-main   the whole suite on the installed torch alone; make test-newest   the newest torch's tests alone"
	@echo "make test-fast   the unit and golden tiers only (the edit loop: about a minute)"
	@echo "make typecheck   mypy over the package"
	@echo "make lint    ruff over the code"
	@echo "make update-golden   rewrite tests/golden/ after an intended report change"

demo: install graphviz
	$(PY) -m inductor_lens compile $(DEMO_MODEL)
	@echo "Open it with: $(PY) -m inductor_lens open   (or open the index.html printed above)"

# The tiers are the folders of tests/ (unit, golden, e2e, browser, gpu). `make test` runs them all and
# treats a missing Chromium or Graphviz as a failure; gpu tests skip themselves without CUDA.
# Each job prints its wall time at the end. `make test` installs both environments first, then runs the two jobs
# side by side (most of their time is process start-up and compiles waiting on one core): the first is the whole suite
# but MAIN_LATER, the second the newest torch's tests, then MAIN_LATER on the first environment (so neither core idles
# while the other job finishes: 43 and 39 minutes in a rehearsal, against 52-55 for the whole suite in one job). The second
# job's output is kept in $(STAMP)/test-newest.log and printed after the first's; it fails if either fails.
# PYTEST_ARGS go to every pytest: never a shared --basetemp (each pytest clears its own at start).
MAIN_LATER ?= tests/e2e/test_try_cpu.py tests/e2e/test_ranks_models_cpu.py

test: install-test system-deps $(STAMP)/newest
	@{ $(MAKE) --no-print-directory test-newest; newest_rc=$$?; \
	   $(MAKE) --no-print-directory test-main-later; later_rc=$$?; \
	   [ $$newest_rc -eq 0 ] && [ $$later_rc -eq 0 ]; } > $(STAMP)/test-newest.log 2>&1 & second=$$!; \
	$(MAKE) --no-print-directory test-main MAIN_SELECTION="$(addprefix --ignore=,$(MAIN_LATER))"; main_rc=$$?; \
	wait $$second; second_rc=$$?; \
	echo "=== job 2 (newest torch, then $(MAIN_LATER)), its output:"; cat $(STAMP)/test-newest.log; \
	echo "make test: job 1 exit $$main_rc, job 2 exit $$second_rc"; \
	[ $$main_rc -eq 0 ] && [ $$second_rc -eq 0 ]

test-main: install-test system-deps
	@start=$$(date +%s); \
	$(PY) -m ruff check inductor_lens tests samples benchmarks && \
	$(PY) -m mypy && \
	INDUCTOR_LENS_REQUIRE_BROWSER=1 INDUCTOR_LENS_REQUIRE_GRAPHVIZ=1 $(PY) -m pytest $(MAIN_SELECTION) $(PYTEST_ARGS); \
	rc=$$?; echo "job 1 (torch $$($(PY) -c 'import torch; print(torch.__version__)'), whole suite$(if $(MAIN_SELECTION), but $(MAIN_LATER))): $$(( $$(date +%s) - start )) s, exit $$rc"; \
	exit $$rc

# The part of the whole suite that `make test` runs in its second job, after the newest torch's tests.
test-main-later: install-test system-deps
	@start=$$(date +%s); \
	INDUCTOR_LENS_REQUIRE_BROWSER=1 INDUCTOR_LENS_REQUIRE_GRAPHVIZ=1 $(PY) -m pytest $(MAIN_LATER) $(PYTEST_ARGS); \
	rc=$$?; echo "job 2, then (torch $$($(PY) -c 'import torch; print(torch.__version__)'), $(MAIN_LATER)): $$(( $$(date +%s) - start )) s, exit $$rc"; \
	exit $$rc

# The newest torch: unit and golden tiers and the CPU compiles of the samples and the real corpus (--strict).
test-newest: $(STAMP)/newest system-deps
	@start=$$(date +%s); \
	INDUCTOR_LENS_REQUIRE_GRAPHVIZ=1 $(NEWEST_PY) -m pytest $(NEWEST_TESTS) $(PYTEST_ARGS); \
	rc=$$?; echo "job 2 (torch $$($(NEWEST_PY) -c 'import torch; print(torch.__version__)'), parsers and CPU compiles): $$(( $$(date +%s) - start )) s, exit $$rc"; \
	exit $$rc

test-fast: install-test
	$(PY) -m ruff check inductor_lens tests samples benchmarks
	$(PY) -m pytest -m "unit or golden" $(PYTEST_ARGS)

typecheck: install-test
	$(PY) -m mypy

install: $(STAMP)/install
install-test: $(STAMP)/install-test

$(PY):
	$(PYTHON) -m venv --system-site-packages $(VENV)

PIP := $(PY) -m pip install --disable-pip-version-check -q
CPU_PIN := torch==$(TORCH_VERSION)+cpu triton==$(TRITON_VERSION)

# An existing torch is never replaced. Without one: the CPU build from PyTorch's CPU index when it answers
# within TORCH_PROBE_TIMEOUT seconds (pip's own index stays the main one, for triton and torch's dependencies), else
# the same pin from pip's configured sources, else (with a GPU only) torch==$(TORCH_VERSION) from them.
$(STAMP)/torch: | $(PY)
	@mkdir -p $(STAMP)
	@if $(PY) -c "import torch" 2>/dev/null; then \
		echo "keeping the installed torch $$($(PY) -c 'import torch; print(torch.__version__)')"; \
	elif $(PY) -c "import urllib.request as u; u.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=$(TORCH_PROBE_TIMEOUT))" \
			>/dev/null 2>&1; then \
		echo "no torch found: installing the CPU build $(CPU_PIN) from $(TORCH_CPU_INDEX)"; \
		$(PIP) --extra-index-url $(TORCH_CPU_INDEX) $(CPU_PIN); \
	else \
		echo "no torch found and $(TORCH_CPU_INDEX) unreachable: installing $(CPU_PIN) from pip's configured sources"; \
		$(PIP) $(CPU_PIN) || { \
			if command -v nvidia-smi >/dev/null 2>&1; then \
				echo "no $(CPU_PIN) there; this machine has an NVIDIA GPU: installing torch==$(TORCH_VERSION)"; \
				$(PIP) torch==$(TORCH_VERSION) triton==$(TRITON_VERSION); \
			else \
				echo "error: could not install $(CPU_PIN) (free disk where pip writes: $$(df -h --output=avail /tmp | tail -1 | tr -d ' ')); on a machine without a GPU the CUDA build is never installed: install a CPU torch yourself (pip install torch --index-url $(TORCH_CPU_INDEX)) and run make again" >&2; \
				exit 1; \
			fi; }; \
	fi
	@touch $@

$(STAMP)/install: pyproject.toml $(STAMP)/torch
	$(PIP) -e .
	@touch $@

# The real-model corpus (samples/real/) needs transformers: an installed one is kept; otherwise the pinned
# `real` extra is added with every installed package constrained to its version (nothing is upgraded).
$(STAMP)/install-test: pyproject.toml $(STAMP)/torch
	$(PIP) -e '.[test]'
	@if $(PY) -c "import transformers" 2>/dev/null; then \
		echo "keeping the installed transformers $$($(PY) -c 'import transformers; print(transformers.__version__)')"; \
	else \
		$(PY) -m pip freeze --exclude-editable | grep -E '^[A-Za-z0-9_.-]+==' > $(STAMP)/constraints.txt && \
		echo "installing the real-model corpus's libraries, holding $$(wc -l < $(STAMP)/constraints.txt) installed packages at their versions" && \
		$(PIP) -c $(STAMP)/constraints.txt -e '.[real]'; \
	fi
	@touch $@ $(STAMP)/install

# Graphviz draws the graphs (the report shows a notice without it); Chromium runs the browser tests.
graphviz:
	@command -v dot >/dev/null 2>&1 || $(MAKE) --no-print-directory apt PACKAGES="graphviz" || \
		echo "note: Graphviz 'dot' is not installed; reports will show a notice instead of graph drawings"

system-deps:
	@{ command -v dot >/dev/null 2>&1 && [ -x /usr/bin/chromium ]; } || \
		$(MAKE) --no-print-directory apt PACKAGES="graphviz chromium fonts-dejavu-core"

apt:
	@command -v apt-get >/dev/null 2>&1 || { echo "no apt-get here: install $(PACKAGES) yourself"; exit 1; }
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(PACKAGES)

# Its own environment, never the user's: the CPU build from PyTorch's CPU index when it answers, else the same
# release from pip's configured sources (on PyPI the CUDA build, which runs on a CPU too), then the project and
# its test and corpus extras held at what torch brought.
$(STAMP)/newest: pyproject.toml
	@mkdir -p $(STAMP)
	@[ -x $(NEWEST_PY) ] || $(PYTHON) -m venv $(NEWEST_VENV)
	@if $(NEWEST_PY) -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$(TORCH_NEWEST)')" 2>/dev/null; then \
		echo "keeping torch $$($(NEWEST_PY) -c 'import torch; print(torch.__version__)') in $(NEWEST_VENV)"; \
	elif $(NEWEST_PY) -c "import urllib.request as u; u.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=$(TORCH_PROBE_TIMEOUT))" \
			>/dev/null 2>&1; then \
		echo "$(NEWEST_VENV): installing torch==$(TORCH_NEWEST)+cpu from $(TORCH_CPU_INDEX)"; \
		$(NEWEST_PY) -m pip install --disable-pip-version-check -q --extra-index-url $(TORCH_CPU_INDEX) \
			torch==$(TORCH_NEWEST)+cpu triton==$(TRITON_NEWEST); \
	else \
		echo "$(NEWEST_VENV): $(TORCH_CPU_INDEX) unreachable: installing torch==$(TORCH_NEWEST) from pip's configured sources"; \
		$(NEWEST_PY) -m pip install --disable-pip-version-check -q torch==$(TORCH_NEWEST) triton==$(TRITON_NEWEST); \
	fi
	$(NEWEST_PY) -m pip freeze --exclude-editable | grep -E '^[A-Za-z0-9_.-]+==' > $(STAMP)/newest-constraints.txt
	$(NEWEST_PY) -m pip install --disable-pip-version-check -q -c $(STAMP)/newest-constraints.txt -e '.[test,real]'
	@touch $@

lint: install-test
	$(PY) -m ruff check inductor_lens tests samples benchmarks

update-golden: install-test
	$(PY) -m pytest tests/golden --update-golden

clean:
	rm -rf $(STAMP) $(NEWEST_VENV) build dist *.egg-info tests/actual .pytest_cache
