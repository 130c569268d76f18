# The trainer (train_gpt2.cu) on each back end, checkpoints, the eval tools, and their test.
#   make train_gpt2cpu ATTN=lssar   -> ./train_gpt2cpu_lssar   (g++, CPU back end)
#   make train_gpt2cu ATTN=lssar    -> ./train_gpt2cu_lssar    (nvcc, CUDA back end)
#   make loss_vs_length_cpu ATTN=.. -> build/loss_vs_length_cpu_<attn>   (and loss_vs_length_cu)
#   build/train_gpt2cu_emu_<attn>   the CUDA back end's trainer under the SIMT emulator (tests only)
# ATTN_VARIANTS: attention/attention.mk
CHECKPOINT_OBJ := $(BUILD)/model/checkpoint.o
TRAINER_CPU_HEADERS := model/backend.h model/backend_cpu.h model/gpt2_cpu.h model/gpt2_config.h model/rand.h model/checkpoint.h \
                       eval/sample.h eval/loss_vs_length.h eval/cli.h attention/attention_cpu.h $(wildcard layers/*_cpu.h) \
                       $(wildcard dataloader/*.h)
TRAINER_CUDA_HEADERS := model/backend.h model/gpt2_cuda.cuh model/distributed.h model/rendezvous.h layers/nccl_common.cuh model/gpt2_config.h model/rand.h \
                        model/checkpoint.h eval/sample.h eval/loss_vs_length.h eval/cli.h $(wildcard layers/*.cuh attention/*.cuh) attention/attention_cpu.h \
                        $(wildcard dataloader/*.h)
TRAINER_OBJS = $(CHECKPOINT_OBJ) $(DATALOADER_OBJS)

$(CHECKPOINT_OBJ): model/checkpoint.cpp model/checkpoint.h model/gpt2_config.h dataloader/dataloader.h | $(BUILD)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# CPU back end
TRAIN_CPU_BINS := $(addprefix train_gpt2cpu_,$(ATTN_VARIANTS))
LVL_CPU_BINS := $(addprefix $(BUILD)/loss_vs_length_cpu_,$(ATTN_VARIANTS))
.SECONDEXPANSION:
$(TRAIN_CPU_BINS): train_gpt2cpu_%: train_gpt2.cu $(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS)
	$(CXX) $(CXXFLAGS) -DTRAIN_BACKEND_CPU -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
$(LVL_CPU_BINS): $(BUILD)/loss_vs_length_cpu_%: eval/loss_vs_length.cu $(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) -DTRAIN_BACKEND_CPU -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

.PHONY: train_gpt2cpu train_gpt2cu loss_vs_length_cpu loss_vs_length_cu
train_gpt2cpu: train_gpt2cpu_$(ATTN)
loss_vs_length_cpu: $(BUILD)/loss_vs_length_cpu_$(ATTN)
CPU_BINS += train_gpt2cpu_$(ATTN) $(BUILD)/loss_vs_length_cpu_$(ATTN)

# CUDA back end (nvcc)
TRAIN_CU_BINS := $(addprefix train_gpt2cu_,$(ATTN_VARIANTS))
LVL_CU_BINS := $(addprefix $(BUILD)/loss_vs_length_cu_,$(ATTN_VARIANTS))
$(TRAIN_CU_BINS): train_gpt2cu_%: train_gpt2.cu $(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS)
	$(NVCC) $(NVCCFLAGS) -DATTN_NAME='"$*"' $< $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
$(LVL_CU_BINS): $(BUILD)/loss_vs_length_cu_%: eval/loss_vs_length.cu $(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -DATTN_NAME='"$*"' $< $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
train_gpt2cu: train_gpt2cu_$(ATTN)
loss_vs_length_cu: $(BUILD)/loss_vs_length_cu_$(ATTN)
CUDA_BINS += train_gpt2cu_$(ATTN) $(BUILD)/loss_vs_length_cu_$(ATTN)

# CUDA back end under the SIMT emulator (g++), for tests
TRAIN_EMU_BINS := $(addprefix $(BUILD)/train_gpt2cu_emu_,$(ATTN_VARIANTS))
$(TRAIN_EMU_BINS): $(BUILD)/train_gpt2cu_emu_%: train_gpt2.cu $(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

# test_trainer runs ./train_gpt2cpu_lssar (CLI, resume, guards, checkpoint refusal) and the emulated
# CUDA trainer (resume)
$(BUILD)/test_trainer: test/test_trainer.cpp test/temp_dir.h test/run_command.h $(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) train_gpt2cpu_lssar $(BUILD)/loss_vs_length_cpu_lssar $(BUILD)/train_gpt2cu_emu_lssar | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(BUILD)/test_trainer
