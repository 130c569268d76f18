# CPU reference tests (rung 1 and 2 of the correctness ladder).
CPU_TEST_DEPS := $(wildcard layers/*_cpu.h attention/attention_cpu.h model/*.h test/gradcheck.h)

$(BUILD)/test_layers_cpu: test/test_layers_cpu.cpp $(CPU_TEST_DEPS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(BLAS_LDLIBS) $(LDLIBS)

TESTS += $(BUILD)/test_layers_cpu

$(BUILD)/test_attention_cpu: test/test_attention_cpu.cpp $(CPU_TEST_DEPS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< -o $@ $(LDLIBS)

TESTS += $(BUILD)/test_attention_cpu
