#!/usr/bin/python3
"""Force probe: ridge regression from a frozen model's final hidden states to the force on each
planet, fitted on labelled systems, evaluated on held-out ones.

Why a linear probe on frozen states (and not the reference's fine-tuning with a regression head):
it measures what the pre-trained representation already holds, costs seconds on a CPU, has one
hyperparameter (the ridge penalty, chosen by cross-validation over labelled systems), and cannot
learn physics of its own: whatever force law comes out of it is linear in the model's features.

Features of time step s of a system: the hidden states (after the final layernorm) at the 2 x bodies
tokens of step s, concatenated and standardised, so the probe sees the model after it has read
every position of step s. Targets per planet: ln|F| and the unit direction F/|F| (the forces span
about three decades, so a vector target would weight only the largest ones); the predicted vector
is exp(predicted ln|F|) times the predicted direction normalised. The first --skip steps of every
system are left out: the masses are in the positions only through motion the model has to see.
"""
import numpy as np

ALPHAS = 10.0 ** np.arange(-4, 5)


def step_features(hidden, bodies, steps):
    """(n, S, 2 B C): the hidden states (n, T, C) of each step's 2 B tokens, concatenated."""
    n, T, C = hidden.shape
    if T != 1 + 2 * bodies * steps:
        raise ValueError(f"hidden states have T = {T}, the systems need 1 + 2 x {bodies} x {steps}")
    return hidden[:, 1:, :].reshape(n, steps, 2 * bodies * C)


def targets(forces):
    """(n, S, P, 3): ln|F|, Fx/|F|, Fy/|F| of the planets' forces (n, S, P, 2)."""
    mag = np.sqrt((forces ** 2).sum(axis=-1, keepdims=True))
    return np.concatenate([np.log(mag), forces / mag], axis=-1)


def to_vectors(y):
    """Force vectors (..., 2) of predicted targets (..., 3)."""
    d = y[..., 1:3]
    return np.exp(y[..., :1]) * d / np.maximum(np.sqrt((d ** 2).sum(axis=-1, keepdims=True)), 1e-12)


def ridge_solve(X, Y, alphas):
    """Ridge coefficients (d, q) of centred X, Y for each alpha (via one SVD)."""
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    UtY = U.T @ Y
    return [Vt.T @ ((s / (s ** 2 + a))[:, None] * UtY) for a in alphas]


def choose_alpha(X, Y, groups, folds=5):
    """The ridge penalty of lowest cross-validated squared error, folds over groups (systems)."""
    ids = np.unique(groups)
    fold_of = {g: i % folds for i, g in enumerate(ids)}
    f = np.array([fold_of[g] for g in groups])
    err = np.zeros(len(ALPHAS))
    for k in range(folds):
        tr, te = f != k, f == k
        mx, my = X[tr].mean(0), Y[tr].mean(0)
        for i, W in enumerate(ridge_solve(X[tr] - mx, Y[tr] - my, ALPHAS)):
            err[i] += (((X[te] - mx) @ W + my - Y[te]) ** 2).sum()
    return float(ALPHAS[np.argmin(err)])


def r2(pred, true):
    """1 - SSE / SST pooled over all components."""
    true = true.reshape(len(true), -1)
    pred = pred.reshape(len(pred), -1)
    return 1.0 - ((pred - true) ** 2).sum() / ((true - true.mean(0)) ** 2).sum()


def fit_probe(hidden, sim, labelled, skip):
    """Fits the probe on systems [0, labelled) and predicts every system. Returns the predicted
    force vectors (n, S, P, 2), the chosen alpha and the held-out metrics."""
    n, S, B, _ = sim["pos"].shape
    P = B - 1
    X = step_features(hidden, B, S).astype(np.float64)        # (n, S, D)
    Y = targets(sim["forces"][:, :, 1:]).reshape(n, S, 3 * P)
    use = np.arange(S) >= skip
    Xl, Yl = X[:labelled, use].reshape(-1, X.shape[-1]), Y[:labelled, use].reshape(-1, Y.shape[-1])
    groups = np.repeat(np.arange(labelled), use.sum())
    mu, sd = Xl.mean(0), Xl.std(0) + 1e-6
    Xl = (Xl - mu) / sd
    alpha = choose_alpha(Xl, Yl, groups)
    my = Yl.mean(0)
    W = ridge_solve(Xl, Yl - my, [alpha])[0]
    Yp = (((X - mu) / sd) @ W + my).reshape(n, S, P, 3)
    pred = to_vectors(Yp)
    ho = slice(labelled, n)
    true_vec = sim["forces"][ho, :, 1:][:, use]
    metrics = dict(alpha=alpha, labelled_systems=labelled, heldout_systems=n - labelled,
                   heldout_samples=int(true_vec.size // 2),
                   r2_vector=r2(pred[ho][:, use].reshape(-1, 2), true_vec.reshape(-1, 2)),
                   r2_logmag=r2(Yp[ho][:, use][..., 0].reshape(-1, 1), Y.reshape(n, S, P, 3)[ho][:, use][..., 0].reshape(-1, 1)),
                   mean_cos=float(np.mean((pred[ho][:, use] * true_vec).sum(-1) /
                                          np.sqrt((pred[ho][:, use] ** 2).sum(-1) * (true_vec ** 2).sum(-1)))))
    return pred, metrics
