# doctest's main, compiled once and linked into every doctest program
$(DOCTEST_MAIN): test/doctest_main.cpp | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_HOST) -c $< -o $@

# CPU reference tests (rungs 1 and 2 of the correctness ladder); test_pytorch runs
# test/gpt2_torch.py (PyTorch) at each run and falls back to test/data/torch_state_*.bin
CPU_REFERENCE_TESTS := $(addprefix $(BUILD)/,test_layers_cpu test_attention_cpu test_model_cpu test_pytorch)

$(CPU_REFERENCE_TESTS): $(BUILD)/%: test/%.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(CPU_REFERENCE_TESTS)

# the bf16 path's attention (attention/attention_bf16_cpu.h) against the float64 reference
$(BUILD)/test_attention_bf16_cpu: test/test_attention_bf16_cpu.cpp $(DOCTEST_MAIN) | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) -o $@ $(BLAS_LDLIBS) $(LDLIBS)
TESTS += $(BUILD)/test_attention_bf16_cpu
