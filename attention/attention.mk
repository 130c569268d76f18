# The attention family (attention/attention_kind.h): CUDA kernels, their emulated test, dev benchmarks.
#   make build/test_attention_cuda      emulated test (SIMT), part of make test
#   make build/test_attention_cuda_gpu  the same test under nvcc, for a GPU (make cuda)
#   make build/attention_forward build/attention_backward   dev benchmarks (nvcc; with cuDNN's flash
#                                       attention as a baseline where cuDNN is installed)
# The variants make knows, in attention/attention_kind.h's order: ATTN=<one of them> builds a
# program for that variant only (-DATTN_NAME='"<name>"': the kind is a compile-time constant).
ATTN_VARIANTS := softmax lssa lssar sigmoid relu softmax_rw sigmoid_l1_rw relu_l1_rw

ATTN_CUDA_HEADERS := attention/attention.cuh attention/attention_forward.cuh attention/attention_backward.cuh \
                     attention/attention_common.cuh attention/attention_kind.h attention/tile.cuh \
                     attention/attention_cpu.h layers/cuda_common.cuh layers/floatx.cuh layers/mma.cuh

TESTS += $(BUILD)/test_attention_cuda
$(BUILD)/test_attention_cuda: test/test_attention_cuda.cu $(ATTN_CUDA_HEADERS) $(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ test/test_attention_cuda.cu -x none $(SIMT_LDLIBS) -o $@

CUDA_BINS += $(BUILD)/test_attention_cuda_gpu $(BUILD)/attention_forward $(BUILD)/attention_backward
$(BUILD)/test_attention_cuda_gpu: test/test_attention_cuda.cu $(ATTN_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -x cu test/test_attention_cuda.cu -o $@

# cuDNN's flash attention joins the dev benchmarks as a baseline (dev/attention_cudnn.h) where cuDNN's
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

$(BUILD)/attention_forward: dev/attention_forward.cu dev/attention_cudnn.h $(ATTN_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) $(ATTN_DEV_CUDNN_FLAGS) -lineinfo -x cu dev/attention_forward.cu -o $@ $(ATTN_DEV_CUDNN_LIBS)

$(BUILD)/attention_backward: dev/attention_backward.cu dev/attention_forward.cu dev/attention_cudnn.h \
                             $(ATTN_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) $(ATTN_DEV_CUDNN_FLAGS) -lineinfo -x cu dev/attention_backward.cu -o $@ $(ATTN_DEV_CUDNN_LIBS)

# test_cudnn_graph: the graphs of dev/attention_cudnn.h finalized and put through cuDNN's heuristics
# against a described sm_90 device, without a GPU. Part of make test where nvcc and a cuDNN whose
# graph header has device descriptions (cuDNN 9) are found; skipped otherwise.
CUDNN_HAS_DEVICEPROP := $(if $(CUDNN_HEADER),$(shell grep -ls CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION \
                                                     $(dir $(CUDNN_HEADER))cudnn_graph*.h))
NVCC_FOUND := $(shell command -v $(NVCC) 2>/dev/null)
ifneq ($(and $(ATTN_DEV_CUDNN_FLAGS),$(CUDNN_HAS_DEVICEPROP),$(NVCC_FOUND)),)
TESTS += $(BUILD)/test_cudnn_graph
endif
$(BUILD)/test_cudnn_graph: test/test_cudnn_graph.cu dev/attention_cudnn.h layers/cuda_common.cuh layers/floatx.cuh \
                           | $(BUILD)
	$(NVCC) $(NVCCFLAGS) $(ATTN_DEV_CUDNN_FLAGS) -x cu test/test_cudnn_graph.cu -o $@ $(ATTN_DEV_CUDNN_LIBS)
