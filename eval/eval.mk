# Evaluation tools of a checkpoint, per back end and attention variant (recipes in train.mk):
#   make loss_vs_length_cpu ATTN=lssar  -> build/loss_vs_length_cpu_lssar   (and _cu: nvcc)
#   make passkey_cpu ATTN=lssar         -> build/passkey_cpu_lssar          (and _cu; _cu_emu for tests)
#   make attention_maps_cpu ATTN=lssar  -> build/attention_maps_cpu_lssar   (CPU back end)
#   make mc_eval_cpu ATTN=lssar         -> build/mc_eval_cpu_lssar          zero-shot multiple choice
#                                          (eval/mc_file.h, eval/mc_eval.h; and _cu; _cu_emu for tests)
#   make gradcheck_cu ATTN=lssar        -> build/gradcheck_cu_lssar         the CUDA back end's gradients
#                                          against the CPU reference (nvcc; run it on a GPU; _cu_emu:
#                                          the same tool under the SIMT emulator)
#   make sample_cpu ATTN=lssar          -> build/sample_cpu_lssar           sampling (and _cu; _cu_emu)
# Each tool is eval/<tool>.cu, built by train.mk's recipe of each back end as
# build/<tool>_<back end>_<variant>: a new tool is one word in EVAL_TOOLS. The tools' tests are in
# test/test.mk.
EVAL_TOOLS     := loss_vs_length passkey attention_maps mc_eval gradcheck sample
# the back ends each tool is built for: gradcheck checks the CUDA back end (no CPU build);
# attention_maps runs on the CPU back end only; loss_vs_length has no emulated build
EVAL_CPU_TOOLS := $(filter-out gradcheck,$(EVAL_TOOLS))
EVAL_CU_TOOLS  := $(filter-out attention_maps,$(EVAL_TOOLS))
EVAL_EMU_TOOLS := $(filter-out loss_vs_length attention_maps,$(EVAL_TOOLS))

# one static pattern rule per tool and back end, over every variant (the stem $* is the variant)
define EVAL_CPU_RULE
$$(addprefix $$(BUILD)/$(1)_cpu_,$$(ATTN_VARIANTS)): $$(BUILD)/$(1)_cpu_%: eval/$(1).cu $$(TRAINER_OBJS) | $$(BUILD)
	$$(BUILD_CPU_PROGRAM)
endef
define EVAL_CU_RULE
$$(addprefix $$(BUILD)/$(1)_cu_,$$(ATTN_VARIANTS)): $$(BUILD)/$(1)_cu_%: eval/$(1).cu $$(TRAINER_OBJS) | $$(BUILD)
	$$(BUILD_CU_PROGRAM)
endef
define EVAL_EMU_RULE
$$(addprefix $$(BUILD)/$(1)_cu_emu_,$$(ATTN_VARIANTS)): $$(BUILD)/$(1)_cu_emu_%: eval/$(1).cu $$(TRAINER_OBJS) $$(EMU_LIBS) | $$(BUILD)
	$$(BUILD_EMU_PROGRAM)
endef
$(foreach t,$(EVAL_CPU_TOOLS),$(eval $(call EVAL_CPU_RULE,$t)))
$(foreach t,$(EVAL_CU_TOOLS),$(eval $(call EVAL_CU_RULE,$t)))
$(foreach t,$(EVAL_EMU_TOOLS),$(eval $(call EVAL_EMU_RULE,$t)))

# make <tool>_cpu, make <tool>_cu: the tool for ATTN
.PHONY: $(EVAL_CPU_TOOLS:%=%_cpu) $(EVAL_CU_TOOLS:%=%_cu)
$(EVAL_CPU_TOOLS:%=%_cpu): %_cpu: $(BUILD)/%_cpu_$(ATTN)
$(EVAL_CU_TOOLS:%=%_cu): %_cu: $(BUILD)/%_cu_$(ATTN)
CPU_BINS  += $(EVAL_CPU_TOOLS:%=$(BUILD)/%_cpu_$(ATTN))
CUDA_BINS += $(EVAL_CU_TOOLS:%=$(BUILD)/%_cu_$(ATTN))
