#!/usr/bin/python3
"""True vs predicted force vectors along one held-out orbit, one panel per model (PNG)."""
import numpy as np


def pick_system(sim, labelled):
    """The held-out system whose planet's distance to the star varies most (the clearest orbit)."""
    d = np.sqrt(((sim["pos"][labelled:, :, 1] - sim["pos"][labelled:, :, 0]) ** 2).sum(-1))
    return labelled + int(np.argmax(d.max(1) / d.min(1)))


def plot(sim, preds, labelled, skip, path, system=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = pick_system(sim, labelled) if system is None else system
    pos, F = sim["pos"][k], sim["forces"][k]            # (S, B, 2)
    S, B, _ = pos.shape
    span = np.ptp(pos[:, 1:].reshape(-1, 2), axis=0).max()
    scale = 0.25 * span / np.sqrt((F[skip:, 1:] ** 2).sum(-1)).max()
    fig, axes = plt.subplots(1, len(preds), figsize=(5.5 * len(preds), 5.2), squeeze=False)
    for ax, (label, pred) in zip(axes[0], preds.items()):
        ax.plot(pos[:, 0, 0], pos[:, 0, 1], "-", color="orange", lw=1, label="star")
        for p in range(1, B):
            ax.plot(pos[:, p, 0], pos[:, p, 1], "-", color="0.6", lw=1, label="planet" if p == 1 else None)
            q = pos[skip:, p]
            ax.quiver(q[:, 0], q[:, 1], F[skip:, p, 0] * scale, F[skip:, p, 1] * scale, angles="xy",
                      scale_units="xy", scale=1, color="black", width=0.004, label="true force" if p == 1 else None)
            ax.quiver(q[:, 0], q[:, 1], pred[k, skip:, p - 1, 0] * scale, pred[k, skip:, p - 1, 1] * scale,
                      angles="xy", scale_units="xy", scale=1, color="tab:red", width=0.004, alpha=0.8,
                      label="predicted" if p == 1 else None)
        m = sim["masses"][k]
        ax.set_title(f"{label}: held-out system {k} (M = {m[0]:.2f}, m = " +
                     ", ".join(f"{x:.2f}" for x in m[1:]) + ")", fontsize=10)
        ax.set_aspect("equal")
        ax.set_xlabel("x (AU)")
        ax.set_ylabel("y (AU)")
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle("Force on the planet: true (black) vs the probe on the model's hidden states (red)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
