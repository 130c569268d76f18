# The CPU back end's bf16 path (model/gpt2_cpu_bf16.h): its profiler and its test.
#   build/profile_cpu          FLOPs per token, bf16/fp32 matmul throughput, share of step time per layer
#   build/test_cpu_bf16        the bf16 path against the fp32 reference (kernels, 10 AdamW steps, resume,
#                              the trainer's -f)
$(BUILD)/profile_cpu: model/profile_cpu.cpp | $(BUILD)
	$(CXX_HOST) $< -o $@ $(BLAS_LDLIBS) $(LDLIBS)
CPU_BINS += $(BUILD)/profile_cpu

$(BUILD)/test_cpu_bf16: test/test_cpu_bf16.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) train_gpt2cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_cpu_bf16
