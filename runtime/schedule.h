// The learning-rate schedule of a run: linear warmup from lr/warmup to lr over the first `warmup`
// steps, then cosine or linear decay to lr * final_frac at the last step, or constant; and the
// re-weighting power's warmup (-pw).
#pragma once

#include <cmath>
#include <string>
#include <vector>

struct LrSchedule {
    float lr = 3e-4f;
    std::string kind = "cosine";  // cosine, linear or constant
    int warmup = 0;
    float final_frac = 1.0f;
    int max_steps = 0;

    static std::vector<std::string> kinds() { return {"cosine", "linear", "constant"}; }

    // the rate of step `step` (1-based)
    float at(int step) const {
        if (step <= warmup) return lr * step / warmup;
        if (kind == "constant" || max_steps <= warmup) return lr;
        double progress = (double)(step - warmup) / (max_steps - warmup);  // (0, 1]
        double min_lr = lr * final_frac;
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
