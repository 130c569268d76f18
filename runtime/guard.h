// The update guard: decides, before an optimizer step, whether the step's loss and gradient norm
// may be applied. A non-finite loss or norm is always refused; with spike_z > 0 (-sl), so is a
// loss more than spike_z standard deviations above its running mean, and with norm_z > 0 (-sg,
// llm.c's gradient z-score) a gradient norm more than norm_z standard deviations above its own,
// each after 20 accepted values. The running means and variances (exact for the first 20 values,
// then exponential with weight 1/20; llm.c's detectors use a window of the last 128) count
// accepted steps only and live in the checkpointed TrainState, so a resumed run guards as the
// uninterrupted one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/checkpoint.h"

// How many running standard deviations x lies above the running mean (0 until 20 values, or
// without spread).
inline double running_z(double x, double mean, double var, int64_t count) {
    if (count < 20) return 0;
    double sd = std::sqrt(var);
    return sd > 0 ? (x - mean) / sd : 0;
}

// Adds x to the running mean and variance.
inline void running_add(double x, double& mean, double& var, int64_t& count) {
    count++;
    double a = std::max(1.0 / count, 0.05), delta = x - mean;
    mean += a * delta;
    var = (1 - a) * (var + a * delta * delta);
}

struct UpdateGuard {
    float spike_z = 0.0f;  // -sl; 0: off
    float norm_z = 0.0f;   // -sg; 0: off

    // true if the update may be applied; else false with reason set. Counts accepted steps only.
    bool accept(double loss, double norm, TrainState& s, std::string& reason) const {
        if (!std::isfinite(loss)) { reason = "non-finite loss"; return false; }
        if (!std::isfinite(norm)) { reason = "non-finite gradient norm"; return false; }
        char buf[96];
        double z = running_z(loss, s.loss_ema, s.loss_emvar, s.loss_count);
        if (spike_z > 0 && z > spike_z) {
            snprintf(buf, sizeof buf, "loss spike (%.2f standard deviations above the running mean)", z);
            reason = buf;
            return false;
        }
        z = running_z(norm, s.norm.mean, s.norm.var, s.norm.count);
        if (norm_z > 0 && z > norm_z) {
            snprintf(buf, sizeof buf, "gradient norm spike (%.2f standard deviations above the running mean)", z);
            reason = buf;
            return false;
        }
        running_add(loss, s.loss_ema, s.loss_emvar, s.loss_count);
        running_add(norm, s.norm.mean, s.norm.var, s.norm.count);
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
