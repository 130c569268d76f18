# The passkey training mix (eval/passkey_mix.h): build/passkey_mix writes the shards, and its test.
PASSKEY_MIX_HEADERS := eval/passkey_mix.h eval/passkey.h eval/cli.h dataloader/tokenizer.h dataloader/shard.h

$(BUILD)/passkey_mix: eval/passkey_mix.cpp $(PASSKEY_MIX_HEADERS) $(DATALOADER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)
CPU_BINS += $(BUILD)/passkey_mix

$(BUILD)/test_passkey_mix: test/test_passkey_mix.cpp test/temp_dir.h test/run_command.h $(PASSKEY_MIX_HEADERS) $(DATALOADER_OBJS) $(BUILD)/passkey_mix | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)
TESTS += $(BUILD)/test_passkey_mix
