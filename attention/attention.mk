# The attention family (attention/attention_kind.h): CUDA kernels, their emulated test, dev benchmarks.
#   make build/test_attention_cuda      emulated test (SIMT), part of make test
#   make build/test_attention_cuda_gpu  the same test under nvcc, for a GPU (make cuda)
#   make build/attention_forward build/attention_backward   dev benchmarks (nvcc; with cuDNN's flash
#                                       attention as a baseline where cuDNN is installed)
# The variants: ATTN_VARIANTS in the Makefile.

TESTS += $(BUILD)/test_attention_cuda
$(BUILD)/test_attention_cuda: test/test_attention_cuda.cu $(DOCTEST_MAIN) $(SIMT_LIB) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(SIMT_LIB) -lboost_context -rdynamic $(LDLIBS) -o $@

CUDA_BINS += $(BUILD)/test_attention_cuda_gpu $(BUILD)/attention_forward $(BUILD)/attention_backward
$(BUILD)/test_attention_cuda_gpu: test/test_attention_cuda.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) -o $@

# cuDNN's flash attention joins the dev benchmarks as a baseline (attention/attention_cudnn.h) where cuDNN's
# header and library are both found; CUDNN_DIR points elsewhere (its include/ and lib64/ or lib/).
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

# test_cudnn_graph: the graphs of attention/attention_cudnn.h finalized and put through cuDNN's heuristics
# against a described sm_90 device, without a GPU. Part of make test where nvcc and a cuDNN whose
# graph header has device descriptions (cuDNN 9) are found; skipped otherwise.
CUDNN_HAS_DEVICEPROP := $(if $(CUDNN_HEADER),$(shell grep -ls CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION \
                                                     $(dir $(CUDNN_HEADER))cudnn_graph*.h))
NVCC_FOUND := $(shell command -v $(NVCC) 2>/dev/null)
ifneq ($(and $(ATTN_DEV_CUDNN_FLAGS),$(CUDNN_HAS_DEVICEPROP),$(NVCC_FOUND)),)
TESTS += $(BUILD)/test_cudnn_graph
endif
$(BUILD)/test_cudnn_graph: test/test_cudnn_graph.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $(ATTN_DEV_CUDNN_FLAGS) $< $(DOCTEST_MAIN) -o $@ $(ATTN_DEV_CUDNN_LIBS)
