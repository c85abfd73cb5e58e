# The README's commands. Each one installs what is missing, then builds.
BUILD ?= build
JOBS  ?= $(shell nproc)
PY    ?= /usr/bin/python3

.PHONY: all setup build data demo test bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

data: setup
	@bash scripts/prepare_data.sh

demo: build data
	@bash scripts/demo.sh

# Two tests at a time on two cores: OpenMP threads must sleep, not spin, while they wait, or the
# two test processes starve each other (10x slower).
test: build data
	@cd $(BUILD) && OMP_WAIT_POLICY=PASSIVE ctest --output-on-failure -j 2

bench: build data
	@$(PY) bench/run_bench.py

clean:
	rm -rf $(BUILD)
