# CPU reference tests (rung 1 and 2 of the correctness ladder).
CPU_TEST_DEPS := $(wildcard layers/*_cpu.h attention/attention_cpu.h model/*.h test/gradcheck.h test/lssar_kink.h)

$(BUILD)/test_layers_cpu: test/test_layers_cpu.cpp $(CPU_TEST_DEPS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(BUILD)/test_layers_cpu

$(BUILD)/test_attention_cpu: test/test_attention_cpu.cpp $(CPU_TEST_DEPS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(LDLIBS)

TESTS += $(BUILD)/test_attention_cpu

$(BUILD)/test_model_cpu: test/test_model_cpu.cpp $(CPU_TEST_DEPS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(BUILD)/test_model_cpu

# runs test/gpt2_torch.py (PyTorch) itself at each run; falls back to test/data/torch_state_*.bin
$(BUILD)/test_pytorch: test/test_pytorch.cpp $(CPU_TEST_DEPS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(BUILD)/test_pytorch
