# CUDA kernels of the non-attention layers (layers/*.cuh) against their CPU reference
# (layers/*_cpu.h): test/test_layers_cuda.cu, run emulated by `make test`, and the same file
# built with nvcc for a GPU (`make cuda`, then ./build/test_layers_cuda_gpu on the GPU machine).
LAYERS_CUDA_HEADERS := $(filter-out %_cpu.h,$(wildcard layers/*.cuh)) $(wildcard layers/*_cpu.h)

# $$(...) : the emulator's libraries are defined by test/simt/*.mk, read after this fragment
.SECONDEXPANSION:
$(BUILD)/test_layers_cuda: test/test_layers_cuda.cu $(LAYERS_CUDA_HEADERS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ $< -x none $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

TESTS += $(BUILD)/test_layers_cuda

$(BUILD)/test_layers_cuda_gpu: test/test_layers_cuda.cu $(LAYERS_CUDA_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) $< -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp

CUDA_BINS += $(BUILD)/test_layers_cuda_gpu
