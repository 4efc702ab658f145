"""Shared fixtures. Statistical tests take ``seed`` (fixed by default; set
DPRELEASE_SEEDS=all to sweep 0-99, as scikit-learn's global_random_seed does).
Fixtures used by more than one test package live here; plain builders are in
``tests/helpers.py``."""

from __future__ import annotations

import importlib.abc
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

collect_ignore = ["mutants.py"]  # a script (README, testing): it runs the suite on mutated copies

HEAVY = ("prefect", "great_expectations")
"""What the unit tier (``make check``, ``DPRELEASE_UNIT=1``) never imports."""


class _UnitTier(importlib.abc.MetaPathFinder):
    """In the unit tier, importing Prefect or GX skips the test module (or the test) that
    asked, and so does starting a Python process (``_no_python_process``): the tier is, by
    construction, every test that runs without them."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name.split(".")[0] in HEAVY:
            pytest.skip(f"imports {name.split('.')[0]}: not in the unit tier", allow_module_level=True)


_POPEN = subprocess.Popen.__init__


def _no_python_process(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
    """In the unit tier, starting Python (the CLI, a Prefect server, a worker) skips the test:
    those processes import Prefect and GX (other programs, e.g. ``lscpu``, run as usual)."""
    first = args if isinstance(args, str | os.PathLike) else next(iter(args), "")  # type: ignore[call-overload]
    name = os.path.basename(str(first))
    if name.startswith(("python", "dprelease", "prefect")) or str(first) == sys.executable:
        pytest.skip(f"starts {name}: not in the unit tier")
    _POPEN(self, args, *rest, **kwargs)  # type: ignore[arg-type]


if os.environ.get("DPRELEASE_UNIT") == "1":
    assert not any(m in sys.modules for m in HEAVY), "the unit tier started with Prefect or GX imported"
    sys.meta_path.insert(0, _UnitTier())
    subprocess.Popen.__init__ = _no_python_process  # type: ignore[method-assign]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module skipped half-imported leaves no half module behind for the next to import."""
    if report.skipped and os.environ.get("DPRELEASE_UNIT") == "1":
        path = os.path.abspath(report.fspath)
        for name, module in list(sys.modules.items()):
            if getattr(module, "__file__", None) == path:
                del sys.modules[name]


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
