# dev/: single-file kernel experiments (llm.c dev/cuda style). Each includes its product kernel
# (layers/*.cuh) as version 1, adds variants, validates against the CPU reference, and on a GPU
# benchmarks (time, effective bandwidth).
#   make dev        emulated builds, each run once to validate version 1 and 2 (no GPU needed)
#   make dev-cuda   nvcc builds (also part of `make cuda`): ./build/dev/<name>_gpu [version]
DEV_NAMES   := encoder rope layernorm matmul gelu classifier adamw global_norm
DEV_EMU     := $(DEV_NAMES:%=$(BUILD)/dev/%)
DEV_GPU     := $(DEV_NAMES:%=$(BUILD)/dev/%_gpu)
DEV_HEADERS := dev/dev_common.h $(wildcard layers/*.cuh layers/*_cpu.h)

# $$(...) : the emulator's libraries are defined by test/simt/*.mk, read after this fragment
.SECONDEXPANSION:
$(BUILD)/dev/%: dev/%.cu $(DEV_HEADERS) $$(VENDOR_LIB) $$(SIMT_LIB) | $(BUILD)
	@mkdir -p $(BUILD)/dev
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ $< -x none $(VENDOR_LIB) $(SIMT_LDLIBS) $(BLAS_LDLIBS) $(LDLIBS) -o $@

$(BUILD)/dev/%_gpu: dev/%.cu $(DEV_HEADERS) | $(BUILD)
	@mkdir -p $(BUILD)/dev
	$(NVCC) $(NVCCFLAGS) $< -o $@ $(NVCC_LDLIBS) $(BLAS_LDLIBS) -lgomp

.PHONY: dev dev-cuda
dev: $(DEV_EMU)
	@set -e; for bin in $(DEV_EMU); do for v in 1 2; do echo "=== $$bin $$v"; ./$$bin $$v; done; done

dev-cuda: $(DEV_GPU)

CUDA_BINS += $(DEV_GPU)

# the attention dev files, emulated (validation only; their nvcc builds are in attention/attention.mk)
$(BUILD)/dev/attention_%: dev/attention_%.cu dev/attention_forward.cu $$(ATTN_CUDA_HEADERS) $$(SIMT_LIB) | $(BUILD)
	@mkdir -p $(BUILD)/dev
	$(CXX) $(CXXFLAGS) $(SIMT_CXXFLAGS) -x c++ $< -x none $(SIMT_LDLIBS) $(LDLIBS) -o $@

# `make test` runs every dev file's validation once (dev/validate.sh)
$(BUILD)/test_dev: dev/validate.sh $(DEV_EMU) $(BUILD)/dev/attention_forward $(BUILD)/dev/attention_backward
	cp dev/validate.sh $@

TESTS += $(BUILD)/test_dev
