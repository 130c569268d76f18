# dev/: single-file kernel experiments (llm.c/dev/cuda style). Each includes its product kernel
# (layers/*.cuh) as version 1, adds variants, validates against the CPU reference, and on a GPU
# benchmarks (time, effective bandwidth).
#   make dev        emulated builds, each run once to validate versions 1 and 2 (no GPU needed)
#   make dev-cuda   nvcc builds: ./build/dev/<name>_gpu [version] (also part of `make cuda`), and the
#                   attention kernels' benchmarks build/attention_forward, build/attention_backward (with
#                   cuDNN's flash attention as a baseline where cuDNN is installed). These two are not part
#                   of `make cuda`: their kernels are, for every variant, in test_attention_cuda_gpu, their
#                   cuDNN graphs in test_cudnn_graph, and `make test` builds and runs them emulated;
#                   the GPU check builds its own (make gpu-check-build).
# The emulated validation that `make test` runs (build/test_dev) is in test/test.mk.
# the one list of dev kernels
DEV_NAMES := encoder rope layernorm matmul gelu classifier adamw global_norm
DEV_EMU   := $(DEV_NAMES:%=$(BUILD)/dev/%)
DEV_GPU   := $(DEV_NAMES:%=$(BUILD)/dev/%_gpu)
DEV_ATTN_EMU := $(BUILD)/dev/attention_forward $(BUILD)/dev/attention_backward

$(DEV_EMU): $(BUILD)/dev/%: dev/%.cu $(EMU_LIBS) | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_EMU) -x c++ $< -x none $(EMU_LDLIBS) -o $@

$(DEV_GPU): $(BUILD)/dev/%_gpu: dev/%.cu | $(BUILD)
	@mkdir -p $(@D)
	$(NVCC_CUDA) $< -o $@ $(NVCC_LDLIBS) $(NVCC_BLAS_LDLIBS) -lgomp

# the attention dev files, emulated (validation only)
$(DEV_ATTN_EMU): $(BUILD)/dev/attention_%: dev/attention_%.cu $(SIMT_LIB) | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_EMU) -x c++ $< -x none $(SIMT_LIB) -lboost_context $(LDLIBS) -o $@

# cuDNN's flash attention joins the attention benchmarks as a baseline (attention/attention_cudnn.h)
# where cuDNN's header and library are both found; CUDNN_DIR points elsewhere (its include/ and lib64/
# or lib/). test/test.mk builds test_cudnn_graph with the same flags.
CUDNN_DIR ?= /usr/local/cuda
CUDNN_HEADER := $(firstword $(wildcard $(CUDNN_DIR)/include/cudnn.h /usr/include/cudnn.h \
                                       /usr/include/x86_64-linux-gnu/cudnn.h))
CUDNN_LIBRARY := $(firstword $(wildcard $(CUDNN_DIR)/lib64/libcudnn.so $(CUDNN_DIR)/lib/libcudnn.so \
                                        /usr/lib/x86_64-linux-gnu/libcudnn.so))
ifneq ($(and $(CUDNN_HEADER),$(CUDNN_LIBRARY)),)
ATTN_DEV_CUDNN_FLAGS := -DATTN_DEV_CUDNN -I$(dir $(CUDNN_HEADER))
ATTN_DEV_CUDNN_LIBS  := -L$(dir $(CUDNN_LIBRARY)) -Xlinker -rpath=$(dir $(CUDNN_LIBRARY)) -lcudnn
endif

$(BUILD)/attention_forward $(BUILD)/attention_backward: $(BUILD)/attention_%: dev/attention_%.cu | $(BUILD)
	$(NVCC_CUDA) $(ATTN_DEV_CUDNN_FLAGS) -lineinfo $< -o $@ $(ATTN_DEV_CUDNN_LIBS)

.PHONY: dev dev-cuda
dev: $(BUILD)/test_dev
	./$(BUILD)/test_dev
dev-cuda: $(DEV_GPU) $(BUILD)/attention_forward $(BUILD)/attention_backward

CUDA_BINS += $(DEV_GPU)
