# Token shards, the distributed data loader and the GPT-2 tokenizer.
#   $(DATALOADER_OBJS)   link these into a program that reads shards or tokenizes
#   (the shard tool, build/tokenize: tools/tools.mk; the tests: test/test.mk)
#   make fuzz            libFuzzer runs of the shard parser and the tokenizer, $(FUZZ_SECONDS) s each
DATALOADER_OBJS := $(BUILD)/dataloader/shard.o $(BUILD)/dataloader/dataloader.o $(BUILD)/dataloader/tokenizer.o

$(BUILD)/dataloader/%.o: dataloader/%.cpp | $(BUILD)
	@mkdir -p $(@D)
	$(CXX_HOST) -c $< -o $@

# ----------------------------------------------------------------------------
# fuzzing (clang + libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer)
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 10
FUZZ_FLAGS = -std=c++17 -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $(DEPFLAGS)

$(BUILD)/fuzz_shard: dataloader/fuzz_shard.cpp dataloader/shard.cpp dataloader/dataloader.cpp | $(BUILD)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $^ -o $@

$(BUILD)/fuzz_tokenizer: dataloader/fuzz_tokenizer.cpp dataloader/tokenizer.cpp | $(BUILD)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $^ -o $@

.PHONY: fuzz fuzz_dataloader
fuzz: fuzz_dataloader
fuzz_dataloader: $(BUILD)/fuzz_shard $(BUILD)/fuzz_tokenizer
	@mkdir -p $(BUILD)/fuzz_corpus/shard $(BUILD)/fuzz_corpus/tokenizer
	/usr/bin/python3 -B -c "import sys; sys.path.insert(0, 'scripts'); import fineweb; \
	    fineweb.write_datafile('$(BUILD)/fuzz_corpus/shard/seed.bin', [50256, 464, 3290, 318, 257, 1332, 13])"
	cp test/data/tokenizer_cases.txt $(BUILD)/fuzz_corpus/tokenizer/seed.txt
	@mkdir -p $(BUILD)/fuzz_crash
	$(BUILD)/fuzz_shard -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -artifact_prefix=$(BUILD)/fuzz_crash/ $(BUILD)/fuzz_corpus/shard
	$(BUILD)/fuzz_tokenizer -max_total_time=$(FUZZ_SECONDS) -max_len=1024 -artifact_prefix=$(BUILD)/fuzz_crash/ $(BUILD)/fuzz_corpus/tokenizer
