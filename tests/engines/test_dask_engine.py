"""The Dask engine on a LocalCluster (2 worker processes) against the local engine: the
same sufficient statistics on the same data, for CSV, gzipped CSV and Parquet input."""

import functools
import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dprelease.engines.chunks import Scan
from dprelease.engines.runners import DaskEngine, LocalEngine
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.factor_gauss import MomentSums
from dprelease.spec import load_spec
from dprelease.tasks.streaming import chunk_job
from tests.helpers import KEYS, PARAMS, adult_rows, latent_code_of, two_passes, write_spec

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask")
    rows = adult_rows(20_000, seed=4)
    spec = load_spec(write_spec(tmp, rows, checks={"holdout_fraction": 0.2, "sample_rows": 400}))
    parquet = tmp / "data.parquet"
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), parquet, row_group_size=6_000)
    (tmp / "data.csv.gz").write_bytes(gzip.compress(spec.data_path.read_bytes()))
    return spec, parquet


def _local(path, job):
    """The local engine's passes in one chunk, with the latent code of its histograms."""
    engine = LocalEngine(path, 20_000)
    scan = engine.run(job.scan, functools.partial(Scan.combine, k=job.sample_rows))
    code = latent_code_of(job.schema, scan.counts)
    total = engine.run(functools.partial(job.statistic, state=MomentSums(code), params=PARAMS), np.add)
    return scan, code, total


@pytest.mark.parametrize("fmt", ["csv", "csv.gz", "parquet"])
def test_dask_statistics_equal_the_local_engine(dask_cluster, data, fmt):
    """A gzipped file cannot be entered in the middle: it is one chunk, read whole."""
    spec, parquet = data
    path = {"csv": spec.data_path, "csv.gz": spec.data_path.with_suffix(".csv.gz"), "parquet": parquet}[fmt]
    job = chunk_job(spec, KEYS)
    local_scan, code, local_total = _local(path, job)
    engine = DaskEngine(path, 3_000, dask_cluster, None)
    try:
        scan, total = two_passes(engine, job, code)
        facts = engine.describe()
    finally:
        engine.close()
    assert (scan.chunks == 1 if fmt == "csv.gz" else scan.chunks > 2) and facts["workers"] == 2
    assert "chunks" not in facts and facts["counting_pass"] is (
        fmt != "parquet"
    )  # a Parquet footer gives the row counts
    assert (scan.rows, scan.fitted) == (local_scan.rows, local_scan.fitted) == (20_000, local_scan.fitted)
    for got, want in zip(scan.counts, local_scan.counts, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(total, local_total, rtol=1e-12)
    assert scan.validation == local_scan.validation
    for got, want in zip(scan.samples(), local_scan.samples(), strict=True):
        assert got.equals(want)


def test_a_wrong_scheduler_address_is_a_clear_error(data, monkeypatch):
    import dprelease.engines.runners

    monkeypatch.setattr(dprelease.engines.runners, "CONNECT_TIMEOUT", "2s")
    spec, _ = data
    with pytest.raises(DPReleaseError, match="could not connect to the Dask scheduler"):
        DaskEngine(spec.data_path, 3_000, "tcp://127.0.0.1:9", None)


def _leaky(table, start):
    raise ValueError(f"a cell holds {table.column(0)[0]}")


def test_worker_errors_and_task_arguments_carry_no_data(dask_cluster, data):
    """An unexpected error on a worker comes back as a WorkerError naming its type only;
    the tasks' arguments (which Dask logs when a task fails) are a path and two offsets."""
    from dprelease.engines.runners import WorkerError

    spec, _ = data
    engine = DaskEngine(spec.data_path, 3_000, dask_cluster, None)
    try:
        assert all(args == (str(spec.data_path), args[1], args[2]) for _, args in engine._pieces)
        with pytest.raises(WorkerError) as err:
            engine.run(_leaky, lambda a, b: a)
    finally:
        engine.close()
    assert "(ValueError)" in str(err.value) and "a cell holds" not in str(err.value)
