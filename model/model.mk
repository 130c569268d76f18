# The CUDA back end of the model (model/gpt2_cuda.cuh) against the CPU back end (model/gpt2_cpu.h):
# test/test_model_cuda.cu emulated by `make test`, and the same file under nvcc for a GPU
# (./build/test_model_cuda_gpu). The CPU model's own tests are in test/test.mk.
$(BUILD)/test_model_cuda: test/test_model_cuda.cu $(DOCTEST_MAIN) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(EMU_LDLIBS) -o $@

$(BUILD)/test_model_cuda_gpu: test/test_model_cuda.cu $(DOCTEST_MAIN) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp

TESTS     += $(BUILD)/test_model_cuda
CUDA_BINS += $(BUILD)/test_model_cuda_gpu
