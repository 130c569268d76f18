# Orbits to Newton's law (orbits/README.md): the hidden-state tool per attention variant (recipe
# in train.mk), and the pipeline's tests.
#   make hidden_states_cpu ATTN=lssar   -> build/hidden_states_cpu_lssar
#   bash scripts/orbits.sh --quick      the whole pipeline on the CPU
HIDDEN_STATES_CPU_BINS := $(addprefix $(BUILD)/hidden_states_cpu_,$(ATTN_VARIANTS))
$(HIDDEN_STATES_CPU_BINS): $(BUILD)/hidden_states_cpu_%: orbits/hidden_states.cu $(TRAINER_OBJS) | $(BUILD)
	$(BUILD_CPU_PROGRAM)

.PHONY: hidden_states_cpu
hidden_states_cpu: $(BUILD)/hidden_states_cpu_$(ATTN)
CPU_BINS += $(BUILD)/hidden_states_cpu_$(ATTN)

# orbits/test_orbits.py (Python, /usr/bin/python3): simulator, tokens, symbolic regression, flags,
# and the hidden-state tool end to end on a checkpoint the CPU trainer makes in a second.
# build/test_orbits runs it; it prints a doctest-style summary line that scripts/run_tests.sh counts.
ORBITS_PY := $(wildcard orbits/*.py)
$(BUILD)/test_orbits: $(ORBITS_PY) scripts/orbits.sh $(BUILD)/hidden_states_cpu_lssar train_gpt2cpu_lssar | $(BUILD)
	@printf '#!/bin/sh\nexec /usr/bin/python3 orbits/test_orbits.py "$$@"\n' > $@
	@chmod +x $@
TESTS += $(BUILD)/test_orbits
