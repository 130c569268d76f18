// The GPT-2 tokenizer and eval/passkey.h's prompt pieces, loaded once per test program
// (needs the GPT-2 vocabulary: scripts/install_gpt2_vocab.sh).
#pragma once
#include "eval/passkey.h"

static inline const GPT2Tokenizer& tokenizer() {
    static GPT2Tokenizer tok;
    static bool loaded = false;
    if (!loaded) {
        tok.load(GPT2Tokenizer::default_dir());
        loaded = true;
    }
    return tok;
}

static inline const PasskeyParts& parts() {
    static PasskeyParts p = passkey_parts(tokenizer());
    return p;
}
