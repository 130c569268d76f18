# Token shards, the distributed data loader and the GPT-2 tokenizer.
#   $(DATALOADER_OBJS)   link these into a program that reads shards or tokenizes (headers: dataloader/*.h)
#   build/tokenize       the shard tool (build/tokenize -h)
#   make fuzz            libFuzzer runs of the shard parser and the tokenizer, $(FUZZ_SECONDS) s each
DATALOADER_SRCS := dataloader/shard.cpp dataloader/dataloader.cpp dataloader/tokenizer.cpp
DATALOADER_OBJS := $(patsubst dataloader/%.cpp,$(BUILD)/dataloader/%.o,$(DATALOADER_SRCS))
DATALOADER_HDRS := $(wildcard dataloader/*.h)

$(BUILD)/dataloader/%.o: dataloader/%.cpp $(DATALOADER_HDRS) | $(BUILD)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/tokenize: dataloader/tokenize.cpp $(DATALOADER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)

CPU_BINS += $(BUILD)/tokenize

$(BUILD)/test_shards: test/test_shards.cpp test/temp_dir.h $(DATALOADER_OBJS) | $(BUILD)
	$(CXX) $(CXXFLAGS) $< $(DATALOADER_OBJS) -o $@ $(LDLIBS)

TESTS += $(BUILD)/test_shards

# test_tokenizer runs build/tokenize, PCRE2 (an independent regex engine) and node
$(BUILD)/test_tokenizer: test/test_tokenizer.cpp test/temp_dir.h $(DATALOADER_OBJS) | $(BUILD) $(BUILD)/tokenize
	$(CXX) $(CXXFLAGS) $< $(DATALOADER_OBJS) -o $@ -lpcre2-8 $(LDLIBS)

TESTS += $(BUILD)/test_tokenizer

# ----------------------------------------------------------------------------
# fuzzing (clang + libFuzzer, with AddressSanitizer and UndefinedBehaviorSanitizer)
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 10
FUZZ_FLAGS := -std=c++17 -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined

$(BUILD)/fuzz_shard: dataloader/fuzz_shard.cpp dataloader/shard.cpp dataloader/dataloader.cpp $(DATALOADER_HDRS) | $(BUILD)
	$(FUZZ_CXX) $(FUZZ_FLAGS) dataloader/fuzz_shard.cpp dataloader/shard.cpp dataloader/dataloader.cpp -o $@

$(BUILD)/fuzz_tokenizer: dataloader/fuzz_tokenizer.cpp dataloader/tokenizer.cpp $(DATALOADER_HDRS) | $(BUILD)
	$(FUZZ_CXX) $(FUZZ_FLAGS) dataloader/fuzz_tokenizer.cpp dataloader/tokenizer.cpp -o $@

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
