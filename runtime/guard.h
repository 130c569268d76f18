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

// The check before a checkpoint is written: the loss of the step's last micro-batch again, with
// the updated weights. A blow-up (not finite, or above 2 x + 1 of the loss before the update or of
// the loss the check saw at the previous checkpoint) stops the run before it becomes a checkpoint,
// so that the checkpoint the advice names is one the advice works from.
struct BlowUpCheck {
    double last_checked_loss = -1;  // -1: none yet

    bool blew_up(double before, double after) const {
        double reference = last_checked_loss >= 0 ? std::min(before, last_checked_loss) : before;
        return !(std::isfinite(after) && after <= 2 * reference + 1);
    }
    void passed(double after) { last_checked_loss = after; }
};

// "No checkpoint ..." or "The last good checkpoint is X", and what to do from there.
inline std::string recovery_advice(const std::string& last_checkpoint) {
    if (last_checkpoint.empty())
        return "No checkpoint of this run was written: start it again with a lower learning rate (-l) or "
               "harder clipping (a lower -gc).";
    return "The last good checkpoint is " + last_checkpoint +
           ": lower the learning rate (-l) or clip harder (a lower -gc), then resume from it (-y 1).";
}
