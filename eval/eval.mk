# Evaluation tools of a checkpoint, per back end and attention variant (recipes in train.mk):
#   make loss_vs_length_cpu ATTN=lssar  -> build/loss_vs_length_cpu_lssar   (and _cu: nvcc)
#   make passkey_cpu ATTN=lssar         -> build/passkey_cpu_lssar          (and _cu; _cu_emu for tests)
#   make attention_maps_cpu ATTN=lssar  -> build/attention_maps_cpu_lssar   (CPU back end)
LVL_CPU_BINS       := $(addprefix $(BUILD)/loss_vs_length_cpu_,$(ATTN_VARIANTS))
LVL_CU_BINS        := $(addprefix $(BUILD)/loss_vs_length_cu_,$(ATTN_VARIANTS))
PASSKEY_CPU_BINS   := $(addprefix $(BUILD)/passkey_cpu_,$(ATTN_VARIANTS))
PASSKEY_CU_BINS    := $(addprefix $(BUILD)/passkey_cu_,$(ATTN_VARIANTS))
PASSKEY_EMU_BINS   := $(addprefix $(BUILD)/passkey_cu_emu_,$(ATTN_VARIANTS))
ATTN_MAPS_CPU_BINS := $(addprefix $(BUILD)/attention_maps_cpu_,$(ATTN_VARIANTS))

$(LVL_CPU_BINS): $(BUILD)/loss_vs_length_cpu_%: eval/loss_vs_length.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)
$(LVL_CU_BINS): $(BUILD)/loss_vs_length_cu_%: eval/loss_vs_length.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CU_PROGRAM)
$(PASSKEY_CPU_BINS): $(BUILD)/passkey_cpu_%: eval/passkey.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)
$(PASSKEY_CU_BINS): $(BUILD)/passkey_cu_%: eval/passkey.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CU_PROGRAM)
$(PASSKEY_EMU_BINS): $(BUILD)/passkey_cu_emu_%: eval/passkey.cu $(TRAINER_OBJS) $(EMU_LIBS) | $(BUILD)
	$(BUILD_EMU_PROGRAM)
$(ATTN_MAPS_CPU_BINS): $(BUILD)/attention_maps_cpu_%: eval/attention_maps.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)

# the statistics of loss versus length (position buckets, beyond the training length, paired
# differences, block bootstrap) against direct computations
$(BUILD)/test_length_stats: test/test_length_stats.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_length_stats

.PHONY: loss_vs_length_cpu loss_vs_length_cu passkey_cpu passkey_cu attention_maps_cpu
loss_vs_length_cpu: $(BUILD)/loss_vs_length_cpu_$(ATTN)
loss_vs_length_cu: $(BUILD)/loss_vs_length_cu_$(ATTN)
passkey_cpu: $(BUILD)/passkey_cpu_$(ATTN)
passkey_cu: $(BUILD)/passkey_cu_$(ATTN)
attention_maps_cpu: $(BUILD)/attention_maps_cpu_$(ATTN)
CPU_BINS  += $(BUILD)/loss_vs_length_cpu_$(ATTN) $(BUILD)/passkey_cpu_$(ATTN) $(BUILD)/attention_maps_cpu_$(ATTN)
CUDA_BINS += $(BUILD)/loss_vs_length_cu_$(ATTN) $(BUILD)/passkey_cu_$(ATTN)

# The tools' tests (each runs its tool built for lssar; they read the GPT-2 vocabulary,
# scripts/install_gpt2_vocab.sh):
#   test_passkey, test_passkey_cu_emu   passkey on the CPU and the emulated CUDA back end
#   test_passkey_gpu                    the same on a GPU (`make cuda`)
#   test_attention_maps                 the maps against the forward, and the tool end to end
$(BUILD)/test_passkey: test/test_passkey.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/passkey_cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
$(BUILD)/test_passkey_cu_emu: test/test_passkey.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(EMU_LIBS) \
                              $(BUILD)/passkey_cu_emu_lssar | $(BUILD)
	$(CXX_EMU) -x c++ $< -x none $(DOCTEST_MAIN) $(TRAINER_OBJS) $(EMU_LDLIBS) -o $@
$(BUILD)/test_passkey_gpu: test/test_passkey.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/passkey_cu_lssar | $(BUILD)
	$(NVCC_CPP_OBJ)
	$(NVCC_LINK) $@.o $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
$(BUILD)/test_attention_maps: test/test_attention_maps.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) \
                              $(BUILD)/attention_maps_cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS     += $(BUILD)/test_passkey $(BUILD)/test_passkey_cu_emu $(BUILD)/test_attention_maps
CUDA_BINS += $(BUILD)/test_passkey_gpu

# The gradient check of the CUDA back end against the CPU reference (eval/gradcheck.cu):
#   make gradcheck_cu ATTN=lssar  -> build/gradcheck_cu_lssar       (nvcc; run it on a GPU)
#   build/gradcheck_cu_emu_<attn>    the same tool under the SIMT emulator
#   test_gradcheck                   runs build/gradcheck_cu_emu_lssar on a tiny model, and with one
#                                    gradient deliberately scaled
GRADCHECK_CU_BINS  := $(addprefix $(BUILD)/gradcheck_cu_,$(ATTN_VARIANTS))
GRADCHECK_EMU_BINS := $(addprefix $(BUILD)/gradcheck_cu_emu_,$(ATTN_VARIANTS))
$(GRADCHECK_CU_BINS): $(BUILD)/gradcheck_cu_%: eval/gradcheck.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CU_PROGRAM)
$(GRADCHECK_EMU_BINS): $(BUILD)/gradcheck_cu_emu_%: eval/gradcheck.cu $(TRAINER_OBJS) $(EMU_LIBS) | $(BUILD)
	$(BUILD_EMU_PROGRAM)
.PHONY: gradcheck_cu
gradcheck_cu: $(BUILD)/gradcheck_cu_$(ATTN)
CUDA_BINS += $(BUILD)/gradcheck_cu_$(ATTN)
$(BUILD)/test_gradcheck: test/test_gradcheck.cpp $(DOCTEST_MAIN) $(BUILD)/gradcheck_cu_emu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_gradcheck

# re-weighting at evaluation (-rw): an lssa checkpoint through each lssar tool, as the lssar checkpoint
# with its weights
$(BUILD)/test_reweight_eval: test/test_reweight_eval.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/loss_vs_length_cpu_lssar \
                             $(BUILD)/passkey_cpu_lssar $(BUILD)/mc_eval_cpu_lssar $(BUILD)/attention_maps_cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_reweight_eval

# the comparisons' statistics (eval/stats_tests.py against SciPy) and the report tools using them
$(BUILD)/test_stats_tools: test/test_stats_tools.py eval/stats_tests.py eval/compare_mc.py eval/passkey_report.py eval/gap_report.py \
                           eval/extrapolation_report.py eval/plot_positions.py scripts/ablation_table.py | $(BUILD)
	printf '#!/bin/sh\nexec /usr/bin/python3 test/test_stats_tools.py\n' > $@
	chmod +x $@
TESTS += $(BUILD)/test_stats_tools

# Sampling from a checkpoint (eval/sample.cu), per back end and attention variant, and its test:
#   make sample_cpu ATTN=lssar  -> build/sample_cpu_lssar    (and sample_cu: nvcc; _cu_emu for tests)
SAMPLE_CPU_BINS := $(addprefix $(BUILD)/sample_cpu_,$(ATTN_VARIANTS))
SAMPLE_CU_BINS  := $(addprefix $(BUILD)/sample_cu_,$(ATTN_VARIANTS))
SAMPLE_EMU_BINS := $(addprefix $(BUILD)/sample_cu_emu_,$(ATTN_VARIANTS))
$(SAMPLE_CPU_BINS): $(BUILD)/sample_cpu_%: eval/sample.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)
$(SAMPLE_CU_BINS): $(BUILD)/sample_cu_%: eval/sample.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CU_PROGRAM)
$(SAMPLE_EMU_BINS): $(BUILD)/sample_cu_emu_%: eval/sample.cu $(TRAINER_OBJS) $(EMU_LIBS) | $(BUILD)
	$(BUILD_EMU_PROGRAM)
.PHONY: sample_cpu sample_cu
sample_cpu: $(BUILD)/sample_cpu_$(ATTN)
sample_cu: $(BUILD)/sample_cu_$(ATTN)
CPU_BINS  += $(BUILD)/sample_cpu_$(ATTN)
CUDA_BINS += $(BUILD)/sample_cu_$(ATTN)
# test_sample: greedy sampling against the reference's teacher-forced argmax (CPU and emulated
# CUDA), the seed, the refusals, byte-level and GPT-2 text
$(BUILD)/test_sample: test/test_sample.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) $(BUILD)/sample_cpu_lssar \
                      $(BUILD)/sample_cu_emu_lssar train_gpt2cpu_lssar | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_sample
# test_export: scripts/export.py and its PyTorch module against the CPU reference, every variant and
# learned p, and the export -> import -> export round trip (PyTorch: /usr/bin/python3)
$(BUILD)/test_export: test/test_export.cpp $(DOCTEST_MAIN) $(TRAINER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_export
