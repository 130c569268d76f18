// The learning-rate schedule of a run: linear warmup from lr/warmup to lr over the first `warmup`
// steps, then cosine or linear decay to lr * final_frac at the last step, or constant, or wsd
// (warmup, stable, decay): lr until the last cooldown_frac of the steps, then linear to
// lr * final_frac at the last step (llm.c's -k wsd decays as 1 - sqrt over the last 20%); and the
// re-weighting power's warmup (-pw).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

struct LrSchedule {
    float lr = 3e-4f;
    std::string kind = "cosine";  // cosine, linear, constant or wsd
    int warmup = 0;
    float final_frac = 1.0f;
    float cooldown_frac = 0.2f;   // wsd: the share of the steps that decays, at the end
    int max_steps = 0;

    static std::vector<std::string> kinds() { return {"cosine", "linear", "constant", "wsd"}; }

    // wsd: the last step at lr; the cooldown runs from there to max_steps (never into the warmup)
    int cooldown_start() const {
        int cooldown = (int)std::lround((double)cooldown_frac * max_steps);
        return std::max(warmup, max_steps - cooldown);
    }

    // the rate of step `step` (1-based)
    float at(int step) const {
        if (step <= warmup) return lr * step / warmup;
        if (kind == "constant" || max_steps <= warmup) return lr;
        double min_lr = lr * final_frac;
        if (kind == "wsd") {
            int start = cooldown_start();
            if (step <= start || max_steps <= start) return lr;
            double progress = (double)(step - start) / (max_steps - start);  // (0, 1]
            return (float)(min_lr + (lr - min_lr) * (1.0 - progress));
        }
        double progress = (double)(step - warmup) / (max_steps - warmup);  // (0, 1]
        double decay = kind == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
        return (float)(min_lr + (lr - min_lr) * decay);
    }
};

// -pw N: the re-weighting power of step `step` (1-based) rises linearly from 1 at step 1 to p at
// step N + 1 and stays there (re-weighting starts out without sharpening).
inline float p_at_step(float p, int warmup, int step) {
    if (warmup <= 0 || step > warmup) return p;
    return (float)(1.0 + (p - 1.0) * (double)(step - 1) / warmup);
}
