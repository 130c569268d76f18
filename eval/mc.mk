# Zero-shot multiple-choice evaluation (eval/mc_file.h, eval/mc_eval.h) of a checkpoint, per back
# end and attention variant, and its tests.
#   make mc_eval_cpu ATTN=lssar   -> build/mc_eval_cpu_lssar      (g++, CPU back end)
#   make mc_eval_cu ATTN=lssar    -> build/mc_eval_cu_lssar       (nvcc, CUDA back end)
#   build/mc_eval_cu_emu_<attn>      the CUDA back end's tool under the SIMT emulator (tests only)
# model/model.mk, read after this fragment, defines the trainer's headers and objects used here,
# hence the second expansion of the prerequisites.
MC_VARIANTS := softmax lssa lssar
MC_HEADERS := eval/mc_file.h eval/mc_eval.h
MC_CPU_BINS := $(addprefix $(BUILD)/mc_eval_cpu_,$(MC_VARIANTS))
MC_CU_BINS := $(addprefix $(BUILD)/mc_eval_cu_,$(MC_VARIANTS))
MC_EMU_BINS := $(addprefix $(BUILD)/mc_eval_cu_emu_,$(MC_VARIANTS))
.SECONDEXPANSION:
$(MC_CPU_BINS): $(BUILD)/mc_eval_cpu_%: eval/mc_eval.cu $(MC_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) -DTRAIN_BACKEND_CPU -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
$(MC_CU_BINS): $(BUILD)/mc_eval_cu_%: eval/mc_eval.cu $(MC_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -DATTN_NAME='"$*"' $< $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
$(MC_EMU_BINS): $(BUILD)/mc_eval_cu_emu_%: eval/mc_eval.cu $(MC_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

.PHONY: mc_eval_cpu mc_eval_cu
mc_eval_cpu: $(BUILD)/mc_eval_cpu_$(ATTN)
mc_eval_cu: $(BUILD)/mc_eval_cu_$(ATTN)
CPU_BINS += $(BUILD)/mc_eval_cpu_$(ATTN)
CUDA_BINS += $(BUILD)/mc_eval_cu_$(ATTN)

# test/test_mc_eval.cpp: the format and its refusals, scoring, the planted file through the trainer
# (-f) and the tools (CPU, emulated CUDA), the PyTorch cross-check (test/gpt2_torch.py) and the
# preparation script's unit tests (test/test_prepare_mc.py, which runs build/tokenize)
$(BUILD)/test_mc_eval: test/test_mc_eval.cpp test/temp_dir.h test/run_command.h $(MC_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) \
        $(BUILD)/mc_eval_cpu_lssar $(BUILD)/mc_eval_cpu_softmax $(BUILD)/mc_eval_cu_emu_lssar train_gpt2cpu_lssar $(BUILD)/tokenize | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_mc_eval
