# The passkey training mix (eval/passkey_mix.h): build/passkey_mix writes the shards, and its test.
$(BUILD)/passkey_mix: eval/passkey_mix.cpp $(DATALOADER_OBJS) | $(BUILD)
	$(CXX_HOST) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)
CPU_BINS += $(BUILD)/passkey_mix

$(BUILD)/test_passkey_mix: test/test_passkey_mix.cpp $(DOCTEST_MAIN) $(DATALOADER_OBJS) $(BUILD)/passkey_mix | $(BUILD)
	$(CXX_HOST) $< $(DOCTEST_MAIN) $(DATALOADER_OBJS) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_passkey_mix
