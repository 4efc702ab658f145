"""Does the row-keyed dither (``mechanisms.rowkeys``) change utility? The near-noiseless
(ε = 10⁶) income AUC on Adult's 80/20 split, paired by seed, against numpy's uniform draws
from a generator seeded with the same key: ``.venv/bin/python benchmarks/check_dither.py [SEEDS]``.

Everything but the dither is the same per seed (the noise, the factor model's sampling),
so the paired difference isolates it. Prints the two means and the mean difference with
its standard error.
"""

from __future__ import annotations

import sys

import numpy as np
from bench_inprocess import auc, release_once
from common import load_adult

import dprelease.mechanisms.factor_gauss as fg
from dprelease.engines.tables import table_to_bins
from dprelease.mechanisms.latent import to_latent


def _numpy_dither(bins, code, params, dither):
    u = np.random.default_rng(int(dither[0, 0] * 2**53)).random(bins.shape)  # a key from the row-keyed draw
    return fg.bound_rows(to_latent(bins, code, u), params.clip, params.bound(bins.shape[1]))


def main(seeds: int) -> None:
    adult = load_adult()
    train, test = adult.split()
    schema, spec = adult.schema, adult.spec
    bins, params = table_to_bins(train, schema), spec.mechanism_params()

    def aucs() -> np.ndarray:
        return np.array(
            [auc(release_once(bins, schema, spec, params, 1e6, s)[0], test, schema) for s in range(seeds)]
        )

    keyed = aucs()
    fg.latent_rows = _numpy_dither
    plain = aucs()
    d = keyed - plain
    print(
        f"{seeds} seeds, ε = 1e6: row-keyed AUC {keyed.mean():.4f}, numpy {plain.mean():.4f}, "
        f"paired difference {d.mean():+.4f} ± {d.std(ddof=1) / np.sqrt(seeds):.4f} (1 s.e.)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16)
