# One entry point: build, test, demo, dev kernels.
#   make test                 build and run every test that needs no GPU (emulated CUDA included)
#   make train_gpt2cpu        CPU trainer        (ATTN=<variant>, default lssar; make ATTN=x lists them)
#   make train_gpt2cu         CUDA trainer (nvcc)
#   make cuda                 compile and link every CUDA target with nvcc (sm_80, sm_90)
# Each directory adds its targets in its own <dir>/*.mk fragment.

ATTN ?= lssar   # checked against ATTN_VARIANTS (attention/attention.mk) below

CXX      ?= g++
NVCC     ?= /usr/local/cuda/bin/nvcc
BUILD    ?= build
CXXFLAGS ?= -O2 -march=native
CXXFLAGS += -std=c++17 -fopenmp -Wall -Wextra -Wno-unused-parameter -I.
LDLIBS   += -lm
BLAS_LDLIBS := -lopenblas   # the CPU back end's large matmuls (layers/matmul_cpu.h)
NVCCFLAGS ?= -O3 --use_fast_math -std=c++17 \
             -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
NVCCFLAGS += -I. -Xcompiler -fopenmp

TESTS     :=   # test binaries that `make test` runs, in order
CPU_BINS  :=   # host programs built by `make all`
CUDA_BINS :=   # nvcc programs built by `make cuda`

.PHONY: all test cuda clean
all:

# the emulator's fragments first: the others use the variables they define
include $(sort $(wildcard test/*/*.mk)) $(sort $(wildcard */*.mk))

ifeq ($(filter $(ATTN),$(ATTN_VARIANTS)),)
$(error ATTN=$(ATTN) is not a known attention variant; the known ones are: $(ATTN_VARIANTS))
endif

all: $(CPU_BINS)
cuda: $(CUDA_BINS)

test: $(TESTS)
	@bash scripts/run_tests.sh $(TESTS)

$(BUILD):
	@mkdir -p $(BUILD)

clean:
	rm -rf $(BUILD) train_gpt2cpu_* train_gpt2cu_*
