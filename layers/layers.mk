# CUDA kernels of the non-attention layers (layers/*.cuh) against their CPU reference
# (layers/*_cpu.h): test/test_layers_cuda.cu emulated by `make test`, and the same file under nvcc
# for a GPU (./build/test_layers_cuda_gpu).
$(BUILD)/test_layers_cuda: test/test_layers_cuda.cu $(DOCTEST_MAIN) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(EMU_LDLIBS) -o $@

$(BUILD)/test_layers_cuda_gpu: test/test_layers_cuda.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp

TESTS     += $(BUILD)/test_layers_cuda
CUDA_BINS += $(BUILD)/test_layers_cuda_gpu
