# Data parallelism (model/distributed.h) and scripts/launch.sh: test/test_distributed.cu, run
# emulated by `make test` (ranks as threads, host NCCL), and the same file under nvcc for a
# machine with 2 GPUs (`make cuda`, then ./build/test_distributed_gpu).
DISTRIBUTED_HEADERS := model/distributed.h model/rendezvous.h layers/nccl_common.cuh test/tiny_gpt2_cuda.h

.SECONDEXPANSION:
$(BUILD)/test_distributed: test/test_distributed.cu $(DISTRIBUTED_HEADERS) $$(GPT2_CUDA_HEADERS) scripts/launch.sh $$(CHECKPOINT_OBJ) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ $< -x none $(CHECKPOINT_OBJ) $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

$(BUILD)/test_distributed_gpu: test/test_distributed.cu $(DISTRIBUTED_HEADERS) $$(GPT2_CUDA_HEADERS) $$(CHECKPOINT_OBJ) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) $< $(CHECKPOINT_OBJ) -o $@ $(NVCC_LDLIBS) -lgomp

CUDA_BINS += $(BUILD)/test_distributed_gpu
TESTS += $(BUILD)/test_distributed
