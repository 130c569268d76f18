# The CUDA back end of the model (model/gpt2_cuda.cuh) against the CPU back end (model/gpt2_cpu.h):
# test/test_model_cuda.cu, run emulated by `make test`, and the same file under nvcc for a GPU
# (`make cuda`, then ./build/test_model_cuda_gpu on the GPU machine).
# GPT2_CUDA_HEADERS: what a program including model/gpt2_cuda.cuh depends on (the trainer too).
GPT2_CUDA_HEADERS := model/gpt2_cuda.cuh model/gpt2_layout.h model/gpt2_config.h model/rand.h attention/attention_cpu.h \
                     $(filter-out %_cpu.h,$(wildcard layers/*.cuh)) $(wildcard attention/*.cuh)
GPT2_CPU_HEADERS  := model/gpt2_cpu.h model/gpt2_layout.h $(wildcard layers/*_cpu.h)

# $$(...) : the emulator's libraries are defined by test/simt/*.mk
.SECONDEXPANSION:
$(BUILD)/test_model_cuda: test/test_model_cuda.cu test/tiny_gpt2_cuda.h $(GPT2_CUDA_HEADERS) $(GPT2_CPU_HEADERS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ $< -x none $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

TESTS += $(BUILD)/test_model_cuda

$(BUILD)/test_model_cuda_gpu: test/test_model_cuda.cu test/tiny_gpt2_cuda.h $(GPT2_CUDA_HEADERS) $(GPT2_CPU_HEADERS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -x cu $< -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp

CUDA_BINS += $(BUILD)/test_model_cuda_gpu
