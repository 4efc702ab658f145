"""Shared fixtures. Statistical tests take ``seed`` (fixed by default; set
DPRELEASE_SEEDS=all to sweep 0-99, as scikit-learn's global_random_seed does)."""

from __future__ import annotations

import os

import numpy as np
import pytest

collect_ignore = ["mutants.py"]  # a script (README, testing): it runs the suite on mutated copies

_SEEDS = list(range(100)) if os.environ.get("DPRELEASE_SEEDS") == "all" else [42]


@pytest.fixture(params=_SEEDS)
def seed(request: pytest.FixtureRequest) -> int:
    return request.param


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server for every end-to-end test of the session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A PostgreSQL database for the ledger tests: ``DPRELEASE_TEST_POSTGRES_URL`` (set by
    .ci/run, which starts a server on loopback; see .ci/postgres.sh). Skipped when unset
    outside CI; in CI (``CI`` set) a missing server is a failure, not a skip."""
    url = os.environ.get("DPRELEASE_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("DPRELEASE_TEST_POSTGRES_URL is not set in CI; .ci/run must start PostgreSQL")
        pytest.skip('no PostgreSQL: eval "$(.ci/postgres.sh start)" to run these tests')
    return url
