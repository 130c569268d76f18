// How a model's token ids are text: GPT-2's BPE (vocabulary 50257) or bytes (vocabulary 256, token
// i is byte i: the byte-level corpora of scripts/prepare_kjv.sh --bytes and prepare_fortunes.sh
// --bytes). The evaluation tools that read or write text (passkey prompts, attention maps of a
// -text, samples) take the codec of the checkpoint's vocabulary, so a byte-level model needs no
// tokenizer.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dataloader/tokenizer.h"

// Byte-level shards start every document with byte 0 (as GPT-2 shards start one with <|endoftext|>).
constexpr int BYTE_DOC_START = 0;

class TextCodec {
public:
    static constexpr int BYTE_VOCAB = 256;

    // Bytes: token i is byte i.
    static TextCodec bytes() { return TextCodec(); }
    // GPT-2 BPE with a tokenizer the caller keeps alive.
    static TextCodec bpe(const GPT2Tokenizer& tok) {
        TextCodec c;
        c.bpe_ = &tok;
        return c;
    }
    // The codec of a model of vocab_size tokens: bytes for 256; GPT-2 BPE for 50257 (loads the
    // vocabulary files: the tokenizer's error names a missing one and scripts/install_gpt2_vocab.sh).
    // Another vocabulary has no text: throws naming it.
    static TextCodec for_vocab(int vocab_size) {
        if (vocab_size == BYTE_VOCAB) return bytes();
        if (vocab_size != GPT2Tokenizer::VOCAB_SIZE)
            throw std::invalid_argument("a vocabulary of " + std::to_string(vocab_size) +
                                        " tokens is neither bytes (256) nor GPT-2 BPE (50257): this model's tokens "
                                        "are not text");
        TextCodec c;
        c.owned_ = std::make_shared<GPT2Tokenizer>();
        c.owned_->load(GPT2Tokenizer::default_dir());
        c.bpe_ = c.owned_.get();
        return c;
    }

    bool is_bytes() const { return bpe_ == nullptr; }
    const char* name() const { return is_bytes() ? "bytes" : "GPT-2 BPE"; }
    int vocab_size() const { return is_bytes() ? BYTE_VOCAB : GPT2Tokenizer::VOCAB_SIZE; }

    // Appends the ids of text to out (cache: the BPE's, may be null).
    void encode(std::string_view text, std::vector<int>& out, BpeCache* cache = nullptr) const {
        if (bpe_) return bpe_->encode(text, out, cache);
        for (char c : text) out.push_back((int)(unsigned char)c);
    }
    // The text of ids[0, n); throws if an id is outside the vocabulary.
    std::string decode(const int* ids, size_t n) const {
        if (bpe_) return bpe_->decode(ids, n);
        std::string s;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= BYTE_VOCAB)
                throw std::out_of_range("token " + std::to_string(ids[i]) + " is not a byte");
            s.push_back((char)ids[i]);
        }
        return s;
    }
    std::string decode(const std::vector<int>& ids) const { return decode(ids.data(), ids.size()); }

private:
    const GPT2Tokenizer* bpe_ = nullptr;  // null: bytes
    std::shared_ptr<GPT2Tokenizer> owned_;
};
