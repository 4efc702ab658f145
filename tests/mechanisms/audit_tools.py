"""Black-box privacy-loss audit (privacy-testing note §3): an empirical lower bound on ε
from many runs of a noisy statistic on a neighbouring pair, with a Clopper–Pearson
confidence interval. Shared by the mechanisms' audit tests."""

import math

import numpy as np
from scipy.stats import beta

__all__ = ["ALPHA", "N_AUDIT", "N_SELECT", "audit", "eps_lower_bound"]

N_SELECT, N_AUDIT, ALPHA = 50_000, 200_000, 0.01


def eps_lower_bound(k: int, kp: int, n: int, delta: float) -> float:
    """Clopper–Pearson: with confidence 1 − α no ε below ln((p_low − δ)/q_high) is valid."""
    p_low = beta.ppf(ALPHA / 2, k, n - k + 1) if k > 0 else 0.0
    q_high = beta.ppf(1 - ALPHA / 2, kp + 1, n - kp) if kp < n else 1.0
    return math.log((p_low - delta) / q_high) if p_low > delta else -math.inf


def audit(release, score, delta: float, rng: np.random.Generator) -> float:
    """release(which, N, rng) → (N, d) noisy outputs on D (which=0) or D' (which=1).
    The threshold is chosen on a selection batch, then frozen and counted on fresh runs."""
    s0, s1 = score(release(0, N_SELECT, rng)), score(release(1, N_SELECT, rng))
    best_t, best = None, -math.inf
    for t in np.quantile(np.concatenate([s0, s1]), np.linspace(0.01, 0.999, 400)):
        k, kp = np.sum(s0 > t), np.sum(s1 > t)
        if kp >= 30:
            est = math.log(max(k / N_SELECT - delta, 1e-300) / (kp / N_SELECT))
            best_t, best = (t, est) if est > best else (best_t, best)
    k = int(np.sum(score(release(0, N_AUDIT, rng)) > best_t))
    kp = int(np.sum(score(release(1, N_AUDIT, rng)) > best_t))
    return eps_lower_bound(k, kp, N_AUDIT, delta)
