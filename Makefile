# flashgpt build.
#   make            build every program (works without a GPU: compile and link only)
#   make test       build and run every test (GPU tests report SKIPPED without a CUDA device)
#   make train      prepare tinyshakespeare, train a small GPT on it (TEXT=path: another text)
#   make bench      build and run the benchmarks
#   make venv       numpy into .venv, for scripts/import_gpt2.py and export_hf.py (.venv/bin/python3)
#   make clean
# CUDA code targets Hopper by default; pick another GPU with e.g. GPU_ARCH="-arch=sm_80".

CC       ?= cc
NVCC     ?= nvcc
GPU_ARCH ?= -gencode arch=compute_90a,code=sm_90a
CFLAGS   ?= -O3 -Wall -Wextra -Wno-unused-parameter
NVFLAGS  ?= -O3 -std=c++17 $(GPU_ARCH) -Xcompiler -Wall
CUDA_LIBS = -lcublas -lcublasLt
# Whatever CFLAGS and NVFLAGS say: a switch over an enum without a case for one of its values and
# without a default fails the build, so that an operation of the model (gpt/model_ops.h) that one
# of the paths computing it does not handle is found there.
SWITCH_CHECK := -Werror=switch
BUILD    := build
# The project carries tinyshakespeare compressed (texts/); it is unpacked into the build folder
# when needed. make train uses it unless TEXT names another text file; tests and benchmarks read
# TEST_TEXT (and skip what needs it when it is not there).
DEFAULT_TEXT := $(BUILD)/texts/tinyshakespeare.txt
TEXT      ?=
TEST_TEXT ?= $(DEFAULT_TEXT)

# Plain C libraries: common/, tokenizer/, data/, distributed/, and the GPT model's parameter table
# and step schedule (gpt/param_table.c, gpt/schedule.c), which CPU programs read too. The programs
# sit above them.
C_LIB_SRC := $(wildcard common/*.c tokenizer/*.c data/*.c distributed/*.c gpt/*.c)
C_LIB_OBJ := $(C_LIB_SRC:%.c=$(BUILD)/%.o)

# CUDA libraries: the layers, attention (the ring of context parallelism among it), the GPT
# model, the ring's transport, a run's ranks, and the NCCL collectives (below); the transport and
# the ranks call them through distributed/nccl_comm.h, which a build without NCCL serves too.
CU_LIB_SRC := $(wildcard layers/*.cu attention/*.cu gpt/*.cu) distributed/ring_transport.cu distributed/ranks.cu
CU_LIB_OBJ = $(CU_LIB_SRC:%.cu=$(BUILD)/%.o)

# The trainer as a library (train/, CUDA and plain C): train_gpt is its main; the GPU tests link it.
TRAIN_SRC := $(wildcard train/*.c train/*.cu)
TRAIN_OBJ := $(patsubst %,$(BUILD)/%.o,$(basename $(TRAIN_SRC)))

# The unit tests of the library modules sit in tests/unit/<module>/, their programs in
# build/tests/unit/<module>/ (tests/README.md: the folders of tests/).
CPU_TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/*/test_*.c))
# Programs the Python tests of tests/mirrors/ run: each prints what a C library computes, and its
# test holds a script's Python copy to it (data_order.c: the data loader's batches;
# print_param_table.c: the parameter table; print_rules.c: the architecture's and the optimizer
# settings' rules; print_schedule.c: the step schedule).
TEST_HELPERS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/mirrors/*.c))
GPU_TESTS   := $(patsubst tests/%.cu,$(BUILD)/tests/%,$(wildcard tests/unit/*/test_*.cu))
CPU_BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/bench_*.c))
GPU_BENCHES := $(patsubst bench/%.cu,$(BUILD)/bench/%,$(wildcard bench/bench_*.cu))

CPU_PROGRAMS := bpe prepare_data
GPU_PROGRAMS := train_gpt generate evaluate

# Without nvcc the CUDA programs and GPU tests are left out, and said so.
HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
ifeq ($(HAVE_NVCC),)
UNBUILT_GPU_TESTS := $(wildcard tests/unit/*/test_*.cu)
GPU_PROGRAMS :=
GPU_TESTS :=
GPU_BENCHES :=
$(info nvcc not found: building the CPU programs only)
endif

# NCCL, for more than one GPU: NCCL_HOME, else found beside nvcc, in /usr/local/cuda or /usr,
# else in the Python wheel nvidia-nccl-cu* (site-packages/nvidia/nccl/{include,lib}). Without it
# distributed/nccl_absent.cu stands in, and a launch of several ranks says the build has none.
ifneq ($(HAVE_NVCC),)
NCCL_HOME ?= $(firstword $(foreach d,$(abspath $(dir $(HAVE_NVCC))..) /usr/local/cuda /usr,\
                 $(if $(wildcard $(d)/include/nccl.h),$(d))))
ifeq ($(NCCL_HOME),)
NCCL_HOME := $(shell python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); \
                 print(list(s.submodule_search_locations)[0] if s else "")' 2>/dev/null)
endif
NCCL_LIB := $(firstword $(wildcard $(foreach d,lib lib64 lib/x86_64-linux-gnu,\
                 $(NCCL_HOME)/$(d)/libnccl.so $(NCCL_HOME)/$(d)/libnccl.so.2)))
ifneq ($(and $(wildcard $(NCCL_HOME)/include/nccl.h),$(NCCL_LIB)),)
CU_LIB_SRC += distributed/nccl_comm.cu
CUDA_LIBS  += -L$(dir $(NCCL_LIB)) -l:$(notdir $(NCCL_LIB)) -Xlinker -rpath=$(dir $(NCCL_LIB))
$(BUILD)/distributed/nccl_comm.o: NVFLAGS += -I$(NCCL_HOME)/include
else
CU_LIB_SRC += distributed/nccl_absent.cu
$(info NCCL not found (set NCCL_HOME): this build runs on one GPU only)
endif
endif

# numpy (test data generation only) comes from python3, or from a local venv made on demand;
# when neither works, the tests that need it say SKIPPED.
ifeq ($(shell python3 -c 'import numpy' 2>/dev/null && echo yes),yes)
PYTHON := python3
PYTHON_DEP :=
else
PYTHON := .venv/bin/python3
PYTHON_DEP := .venv/numpy-installed
endif

.PHONY: all test train bench clean
all: $(CPU_PROGRAMS) $(GPU_PROGRAMS)

# test_gpt runs the train_gpt program (a resume), so the programs are built first.
test: $(CPU_TESTS) $(TEST_HELPERS) $(GPU_TESTS) $(CPU_PROGRAMS) $(GPU_PROGRAMS) $(PYTHON_DEP) $(DEFAULT_TEXT)
	@PYTHON=$(PYTHON) BUILD=$(BUILD) TEXT="$(TEST_TEXT)" UNBUILT_GPU_TESTS="$(UNBUILT_GPU_TESTS)" \
	    tests/run_tests.sh $(CPU_TESTS) $(GPU_TESTS)

train: all $(DEFAULT_TEXT)
	TEXT="$(TEXT)" scripts/train_tinyshakespeare.sh

bench: $(CPU_BENCHES) $(GPU_BENCHES) $(CPU_PROGRAMS) $(DEFAULT_TEXT)
	@FLASHGPT_TEXT="$(TEST_TEXT)" bench/run_bench.sh $(CPU_BENCHES) $(GPU_BENCHES)

clean:
	rm -rf $(BUILD) $(CPU_PROGRAMS) train_gpt generate evaluate

# Unpacked through a temporary name, so an interrupted gzip never leaves a partial text.
$(BUILD)/texts/%.txt: texts/%.txt.gz
	@mkdir -p $(dir $@)
	gzip -dc $< > $@.tmp && mv $@.tmp $@

.venv/numpy-installed:
	@(python3 -m venv .venv && .venv/bin/pip install --quiet numpy && touch $@) || \
	    echo "numpy could not be installed into .venv: the Python tests will be skipped"

# The scripts that need numpy run with .venv/bin/python3 once this is made.
.PHONY: venv
venv: .venv/numpy-installed
	@.venv/bin/python3 -c 'import numpy' 2> /dev/null && echo "numpy is in .venv: run the scripts with .venv/bin/python3" || \
	    { echo "make venv: numpy is not in .venv"; exit 1; }

# -MMD -MP: header dependencies come for free.
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SWITCH_CHECK) -MMD -MP -I. -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -Xcompiler $(SWITCH_CHECK) -MMD -MP -I. -c $< -o $@

bpe: $(BUILD)/bpe.o $(C_LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ -lm

prepare_data: $(BUILD)/prepare_data.o $(C_LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ -lm

$(GPU_PROGRAMS): %: $(BUILD)/%.o $(CU_LIB_OBJ) $(C_LIB_OBJ)
	$(NVCC) $(NVFLAGS) $^ -o $@ $(CUDA_LIBS)
train_gpt: $(TRAIN_OBJ)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(C_LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ -lm

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(C_LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ -lm

# GPU tests and benchmarks link every CUDA object, the tests the trainer's too; the patterns above
# cover the CPU ones.
$(GPU_TESTS) $(GPU_BENCHES): $(BUILD)/%: $(BUILD)/%.o $(CU_LIB_OBJ) $(C_LIB_OBJ)
	$(NVCC) $(NVFLAGS) $^ -o $@ $(CUDA_LIBS)
$(GPU_TESTS): $(TRAIN_OBJ)

.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
