# The README's commands. Each one installs what is missing, then builds.
BUILD ?= build
JOBS  ?= $(shell nproc)
PY    ?= /usr/bin/python3

.PHONY: all setup peer-env build data demo test bench bench-window bench-pipeline clean sanitize valgrind fuzz

all: build

setup:
	@bash scripts/setup.sh

# The transformers peer of the Llama parity tests: PyPI's torch and transformers at the versions pinned in
# tests/reference/llama_ref.py, in a venv outside the repository (scripts/peer_env.sh: once ~3 min and
# 5.6 GB, then well under a second). When it cannot be made, the tests that need it fail saying why.
peer-env: setup
	@bash scripts/peer_env.sh >/dev/null || echo "make: no transformers peer (reason above): test_llama_ref will fail"

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

data: setup
	@bash scripts/prepare_data.sh

demo: build data
	@bash scripts/demo.sh

# Two tests at a time on two cores: OpenMP threads must sleep, not spin, while they wait, or the
# two test processes starve each other (10x slower).
test: build data peer-env
	@cd $(BUILD) && OMP_WAIT_POLICY=PASSIVE ctest --output-on-failure -j 2

# ctron beside the PyTorch peers (GPT-2: T, S) and transformers' LlamaForCausalLM (S-llama, the venv of
# peer-env); LoRA / LoRA-FA beside peft; bench/README.md, docs/PERFORMANCE.md.
bench: build data peer-env
	@bash bench/setup_peer.sh
	@$(PY) bench/run_bench.py
	@$(PY) bench/options_bench.py
	@$(PY) bench/lora_bench.py

# Sliding-window attention at s 4096: ctron's flash with and without the window against transformers'
# MistralForCausalLM (bench/window_bench.py; bench/results/<date>-window.md).
bench-window: build data peer-env
	@$(PY) bench/window_bench.py

# Pipeline parallelism on this machine: the bubble, the stages' activation bytes and the point-to-point
# bytes against their theory (bench/results/<date>-pipeline.md, docs/figures/pipeline_stage_memory.svg).
bench-pipeline: build data
	@$(PY) bench/pipeline_bench.py

# AddressSanitizer + UndefinedBehaviorSanitizer build of everything, then every test that runs in one
# process (the MPI ones are left out: Open MPI's own allocations would be reported), including the
# short training runs of the shell tests. Any report fails the test that made it.
SAN_ENV = ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:strict_string_checks=1 \
          UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_WAIT_POLICY=PASSIVE
sanitize: setup data peer-env
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCTRON_SANITIZE=ON -DCTRON_CUDA=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && $(SAN_ENV) ctest --output-on-failure -j 2 -LE mpi

# valgrind memcheck of a tiny training step (2 steps, checkpoint, resume). Valgrind does not
# decode AVX-512: a build without -march=native, and OpenBLAS held to its AVX2 kernels.
valgrind: setup data
	@cmake -S . -B build-vg -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCTRON_CUDA=OFF >/dev/null
	@cmake --build build-vg -j $(JOBS) --target ctron
	@bash scripts/valgrind.sh build-vg/ctron

# libFuzzer targets over every reader of outside input, FUZZ_SECONDS each (default 60).
fuzz: setup
	@bash scripts/fuzz.sh

clean:
	rm -rf $(BUILD) build-asan build-vg build-fuzz
