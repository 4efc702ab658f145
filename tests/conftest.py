"""Shared fixtures. Statistical tests take ``seed`` (fixed by default; set
DPRELEASE_SEEDS=all to sweep 0-99, as scikit-learn's global_random_seed does)."""

from __future__ import annotations

import os

import numpy as np
import pytest

_SEEDS = list(range(100)) if os.environ.get("DPRELEASE_SEEDS") == "all" else [42]


@pytest.fixture(params=_SEEDS)
def seed(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)
