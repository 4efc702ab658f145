"""Shared fixtures. Statistical tests take ``seed`` (fixed by default; set
DPRELEASE_SEEDS=all to sweep 0-99, as scikit-learn's global_random_seed does).
Fixtures used by more than one test package live here; plain builders are in
``tests/helpers.py``."""

from __future__ import annotations

import os
import uuid

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


@pytest.fixture
def postgres_database(postgres_url: str):
    """The URL of a new, empty PostgreSQL database on the test server, dropped after the
    test (the ledger tests' ``url`` and the flow's PostgreSQL ledger)."""
    from sqlalchemy import create_engine, text

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    yield postgres_url.rsplit("/", 1)[0] + "/" + name
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(scope="module")
def dask_cluster():
    """A Dask LocalCluster (2 worker processes, one thread each) for a module's tests: its
    scheduler address."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def adult_streaming(tmp_path_factory):
    """The demo data as CSV and as Parquet (row groups of 3,000), its spec, the memory
    engine's bins and a latent code built from them: the streaming passes' reference."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dprelease.engines.tables import read_table, table_to_bins
    from tests.helpers import adult_rows, latent_code_of, streaming_spec

    tmp = tmp_path_factory.mktemp("adult")
    spec = streaming_spec(tmp)
    schema = spec.public_schema()
    table = read_table(spec.data_path, schema, spec.missing_tokens())
    bins = table_to_bins(table, schema)
    counts = [np.bincount(bins[:, j], minlength=k) for j, k in enumerate(schema.n_bins)]
    parquet = tmp / "data.parquet"
    pq.write_table(pa.Table.from_pandas(adult_rows(32561)), parquet, row_group_size=3_000)
    return spec, bins, counts, latent_code_of(schema, counts), parquet
