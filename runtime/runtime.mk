# The runtime around the model: checkpoints (runtime/checkpoint.h), the rendezvous of a
# data-parallel run (runtime/rendezvous.h), data parallelism over NCCL (runtime/distributed.h).
#   $(RUNTIME_OBJS)   link these into a program that reads or writes checkpoints
RUNTIME_OBJS := $(BUILD)/runtime/checkpoint.o

$(BUILD)/runtime/%.o: runtime/%.cpp | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_HOST) -c $< -o $@

# the id file and TCP, host only
$(BUILD)/test_rendezvous: test/test_rendezvous.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ -pthread $(LDLIBS)

# data parallelism and scripts/launch.sh: emulated (ranks as threads, host NCCL), and the same file
# under nvcc for a machine with GPUs (./build/test_distributed_gpu)
$(BUILD)/test_distributed: test/test_distributed.cu $(DOCTEST_MAIN) $(RUNTIME_OBJS) $(EMU_LIBS) | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(RUNTIME_OBJS) $(EMU_LDLIBS) -o $@

$(BUILD)/test_distributed_gpu: test/test_distributed.cu $(DOCTEST_MAIN) $(RUNTIME_OBJS) | $(BUILD)
	$(NVCC_CUDA) $< $(DOCTEST_MAIN) $(RUNTIME_OBJS) -o $@ $(NVCC_LDLIBS) -lgomp

TESTS     += $(BUILD)/test_rendezvous $(BUILD)/test_distributed
CUDA_BINS += $(BUILD)/test_distributed_gpu
