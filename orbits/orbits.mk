# Orbits to Newton's law (orbits/README.md): the hidden-state tool per attention variant (recipe
# in train.mk); the pipeline's tests (build/test_orbits): test/test.mk.
#   make hidden_states_cpu ATTN=lssar   -> build/hidden_states_cpu_lssar
#   bash scripts/orbits.sh --quick      the whole pipeline on the CPU
HIDDEN_STATES_CPU_BINS := $(addprefix $(BUILD)/hidden_states_cpu_,$(ATTN_VARIANTS))
$(HIDDEN_STATES_CPU_BINS): $(BUILD)/hidden_states_cpu_%: orbits/hidden_states.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)

.PHONY: hidden_states_cpu
hidden_states_cpu: $(BUILD)/hidden_states_cpu_$(ATTN)
CPU_BINS += $(BUILD)/hidden_states_cpu_$(ATTN)
