# Zero-shot multiple-choice evaluation (eval/mc_file.h, eval/mc_eval.h) of a checkpoint, per back
# end and attention variant (recipes in train.mk), and its test.
#   make mc_eval_cpu ATTN=lssar   -> build/mc_eval_cpu_lssar      (g++, CPU back end)
#   make mc_eval_cu ATTN=lssar    -> build/mc_eval_cu_lssar       (nvcc, CUDA back end)
#   build/mc_eval_cu_emu_<attn>      the CUDA back end's tool under the SIMT emulator (tests only)
MC_CPU_BINS := $(addprefix $(BUILD)/mc_eval_cpu_,$(ATTN_VARIANTS))
MC_CU_BINS  := $(addprefix $(BUILD)/mc_eval_cu_,$(ATTN_VARIANTS))
MC_EMU_BINS := $(addprefix $(BUILD)/mc_eval_cu_emu_,$(ATTN_VARIANTS))

$(MC_CPU_BINS): $(BUILD)/mc_eval_cpu_%: eval/mc_eval.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)
$(MC_CU_BINS): $(BUILD)/mc_eval_cu_%: eval/mc_eval.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CU_PROGRAM)
$(MC_EMU_BINS): $(BUILD)/mc_eval_cu_emu_%: eval/mc_eval.cu $(TRAINER_OBJS) $(EMU_LIBS) | $(BUILD)
	$(BUILD_EMU_PROGRAM)

.PHONY: mc_eval_cpu mc_eval_cu
mc_eval_cpu: $(BUILD)/mc_eval_cpu_$(ATTN)
mc_eval_cu: $(BUILD)/mc_eval_cu_$(ATTN)
CPU_BINS  += $(BUILD)/mc_eval_cpu_$(ATTN)
CUDA_BINS += $(BUILD)/mc_eval_cu_$(ATTN)

# test/test_mc_eval.cpp: the format and its refusals, scoring, the planted file through the trainer
# (-f) and the tools (CPU, emulated CUDA), the PyTorch cross-check (test/gpt2_torch.py) and the
# preparation script's unit tests (test/test_prepare_mc.py, which runs build/tokenize)
$(BUILD)/test_mc_eval: test/test_mc_eval.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/mc_eval_cpu_lssar \
                       $(BUILD)/mc_eval_cpu_softmax $(BUILD)/mc_eval_cu_emu_lssar train_gpt2cpu_lssar $(BUILD)/tokenize | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_mc_eval
