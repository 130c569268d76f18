# Attention (Softmax, LSSA, LSSAR): CUDA kernels, their emulated test, dev benchmarks.
#   make build/test_attention_cuda      emulated test (SIMT), part of make test
#   make build/test_attention_cuda_gpu  the same test under nvcc, for a GPU (make cuda)
#   make build/attention_forward build/attention_backward   dev benchmarks (nvcc)
# The trainer takes the variant from ATTN_NVCCFLAGS (-DATTN_VARIANT=0|1|2 for softmax|lssa|lssar).

ATTN_VARIANT_softmax := 0
ATTN_VARIANT_lssa    := 1
ATTN_VARIANT_lssar   := 2
ATTN_NVCCFLAGS := -DATTN_VARIANT=$(ATTN_VARIANT_$(ATTN))

ATTN_CUDA_HEADERS := attention/attention.cuh attention/attention_softmax.cuh attention/attention_lssar.cuh \
                     attention/tile.cuh attention/attention_cpu.h layers/cuda_common.cuh layers/floatx.cuh \
                     layers/mma.cuh

TESTS += $(BUILD)/test_attention_cuda
$(BUILD)/test_attention_cuda: test/test_attention_cuda.cu $(ATTN_CUDA_HEADERS) $(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ test/test_attention_cuda.cu -x none $(SIMT_LDLIBS) -o $@

CUDA_BINS += $(BUILD)/test_attention_cuda_gpu $(BUILD)/attention_forward $(BUILD)/attention_backward
$(BUILD)/test_attention_cuda_gpu: test/test_attention_cuda.cu $(ATTN_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -x cu test/test_attention_cuda.cu -o $@

$(BUILD)/attention_forward: dev/attention_forward.cu $(ATTN_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -lineinfo -x cu dev/attention_forward.cu -o $@

$(BUILD)/attention_backward: dev/attention_backward.cu $(ATTN_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -lineinfo -x cu dev/attention_backward.cu -o $@
