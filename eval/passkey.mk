# Passkey retrieval (eval/passkey.h) of a checkpoint, per back end and attention variant, and its tests.
#   make passkey_cpu ATTN=lssar   -> build/passkey_cpu_lssar      (g++, CPU back end)
#   make passkey_cu ATTN=lssar    -> build/passkey_cu_lssar       (nvcc, CUDA back end)
#   build/passkey_cu_emu_<attn>      the CUDA back end's tool under the SIMT emulator (tests only)
# model/model.mk, read after this fragment, defines the trainer's headers and objects used here,
# hence the second expansion of the prerequisites; the variants are those the top Makefile accepts.
PASSKEY_VARIANTS := softmax lssa lssar
PASSKEY_HEADERS := eval/passkey.h dataloader/tokenizer.h
PASSKEY_CPU_BINS := $(addprefix $(BUILD)/passkey_cpu_,$(PASSKEY_VARIANTS))
PASSKEY_CU_BINS := $(addprefix $(BUILD)/passkey_cu_,$(PASSKEY_VARIANTS))
PASSKEY_EMU_BINS := $(addprefix $(BUILD)/passkey_cu_emu_,$(PASSKEY_VARIANTS))
.SECONDEXPANSION:
$(PASSKEY_CPU_BINS): $(BUILD)/passkey_cpu_%: eval/passkey.cu $(PASSKEY_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) -DTRAIN_BACKEND_CPU -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
$(PASSKEY_CU_BINS): $(BUILD)/passkey_cu_%: eval/passkey.cu $(PASSKEY_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -DATTN_NAME='"$*"' $< $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
$(PASSKEY_EMU_BINS): $(BUILD)/passkey_cu_emu_%: eval/passkey.cu $(PASSKEY_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -DATTN_NAME='"$*"' -x c++ $< -x none $(TRAINER_OBJS) $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

.PHONY: passkey_cpu passkey_cu
passkey_cpu: $(BUILD)/passkey_cpu_$(ATTN)
passkey_cu: $(BUILD)/passkey_cu_$(ATTN)
CPU_BINS += $(BUILD)/passkey_cpu_$(ATTN)
CUDA_BINS += $(BUILD)/passkey_cu_$(ATTN)

# test/test_passkey.cpp, built for each back end; each runs its back end's tool (lssar) and reads
# the GPT-2 vocabulary (scripts/install_gpt2_vocab.sh)
#   build/test_passkey          CPU back end
#   build/test_passkey_cu_emu   CUDA back end under the SIMT emulator
#   build/test_passkey_gpu      CUDA back end, nvcc (`make cuda`; run it on a GPU machine)
$(BUILD)/test_passkey: test/test_passkey.cpp test/temp_dir.h test/run_command.h $(PASSKEY_HEADERS) $$(TRAINER_CPU_HEADERS) $$(TRAINER_OBJS) $(BUILD)/passkey_cpu_lssar | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(TRAINER_OBJS) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
$(BUILD)/test_passkey_cu_emu: test/test_passkey.cpp test/temp_dir.h test/run_command.h $(PASSKEY_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) $$(VENDOR_LIB) $$(SIMT_LIB) $(BUILD)/passkey_cu_emu_lssar | $(BUILD)
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ $< -x none $(TRAINER_OBJS) $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@
# (nvcc's -x cu applies to every file on the line, so the source is compiled on its own first)
$(BUILD)/test_passkey_gpu: test/test_passkey.cpp test/temp_dir.h test/run_command.h $(PASSKEY_HEADERS) $$(TRAINER_CUDA_HEADERS) $$(TRAINER_OBJS) $(BUILD)/passkey_cu_lssar | $(BUILD)
	$(NVCC) $(NVCCFLAGS) -x cu -c $< -o $@.o
	$(NVCC) $(NVCCFLAGS) $@.o $(TRAINER_OBJS) -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp
TESTS += $(BUILD)/test_passkey $(BUILD)/test_passkey_cu_emu
CUDA_BINS += $(BUILD)/test_passkey_gpu
