// The update guard: decides, before an optimizer step, whether the step's loss and gradient norm
// may be applied. A non-finite loss or norm is always refused; with spike_z > 0, so is a loss more
// than spike_z standard deviations above its running mean (after 20 losses). The running mean and
// variance live in the checkpointed TrainState, so a resumed run guards as the uninterrupted one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/checkpoint.h"

struct UpdateGuard {
    float spike_z = 0.0f;  // 0: off

    // true if the update may be applied; else false with reason set. Counts accepted losses only.
    bool accept(double loss, double norm, TrainState& s, std::string& reason) const {
        if (!std::isfinite(loss)) { reason = "non-finite loss"; return false; }
        if (!std::isfinite(norm)) { reason = "non-finite gradient norm"; return false; }
        if (spike_z > 0 && s.loss_count >= 20) {
            double sd = std::sqrt(s.loss_emvar);
            if (sd > 0 && (loss - s.loss_ema) / sd > spike_z) {
                char buf[96];
                snprintf(buf, sizeof buf, "loss spike (%.2f standard deviations above the running mean)",
                         (loss - s.loss_ema) / sd);
                reason = buf;
                return false;
            }
        }
        // running mean and variance: exact for the first 20 losses, then exponential (weight 1/20)
        s.loss_count++;
        double a = std::max(1.0 / s.loss_count, 0.05), delta = loss - s.loss_ema;
        s.loss_ema += a * delta;
        s.loss_emvar = (1 - a) * (s.loss_emvar + a * delta * delta);
        return true;
    }
};
