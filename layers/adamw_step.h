// The arguments of one AdamW step, named: every update of the project (the layers' adamw_update,
// the models' update, the data-parallel update) takes one, so a call names each value it passes:
//   model.update({.lr = lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = wd,
//                 .grad_scale = scale, .step = step});
// Every field but grad_scale is given (g++'s -Wextra names one left out). The hyperparameters are
// double so that a float64 model uses them exactly; the float back ends read them as float
// (in_float), as they did when their arguments were float.
#pragma once

struct AdamWStep {
    double lr, beta1, beta2, eps, weight_decay;
    double grad_scale = 1.0;  // grads *= grad_scale before the step (clipping)
    int step;                 // 1-based
};

// every hyperparameter rounded to float, as a back end that computes in float reads it
inline AdamWStep in_float(const AdamWStep& s) {
    return {(float)s.lr, (float)s.beta1, (float)s.beta2, (float)s.eps, (float)s.weight_decay,
            (float)s.grad_scale, s.step};
}
