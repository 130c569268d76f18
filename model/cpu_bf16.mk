# The CPU back end's bf16 path (model/gpt2_cpu_bf16.h): its profiler and its tests.
#   build/profile_cpu          FLOPs per token, the libraries' kernels, bf16/fp32 matmul throughput, share of
#                              step time per layer, the long-context evaluation on both paths
#   build/test_cpu_bf16        the bf16 path against the fp32 reference (kernels, 10 AdamW steps, resume,
#                              the trainer's -pr)
#   build/test_eval_bf16       the evaluation tools' results on the fp32 and the bf16 path agree
#   (its attention alone: build/test_attention_bf16_cpu, test/test.mk)
$(BUILD)/profile_cpu: model/profile_cpu.cpp | $(BUILD)
	$(CXX_HOST) $< -o $@ $(BLAS_LDLIBS) $(LDLIBS)
CPU_BINS += $(BUILD)/profile_cpu

$(BUILD)/test_cpu_bf16: test/test_cpu_bf16.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) train_gpt2cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_cpu_bf16

$(BUILD)/test_eval_bf16: test/test_eval_bf16.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_eval_bf16
