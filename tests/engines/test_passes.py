"""The streaming passes (``engines.chunks`` run by the local engine, no Prefect): the same
statistics as the memory engine, whatever the chunk size or the input format, in memory
that does not grow with n. The reference data is the root conftest's ``adult_streaming``."""

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

from dprelease.engines.chunks import to_frame
from dprelease.engines.runners import LocalEngine
from dprelease.mechanisms import factor_gauss as fg
from dprelease.mechanisms.rowkeys import row_uniforms
from dprelease.tasks.streaming import chunk_job
from tests.helpers import KEYS, PARAMS, adult_rows, streaming_spec, two_passes


def test_local_passes_equal_the_memory_engine(adult_streaming):
    """Holdout 0: pass 1's histograms are the memory engine's exactly; pass 2's ZᵀZ equals
    ``factor_gauss.moment_sum`` on all rows (the dither is keyed by row, not chunk)."""
    spec, bins, counts, code, _ = adult_streaming
    scan, total = two_passes(LocalEngine(spec.data_path, 4_000), chunk_job(spec, KEYS), code)
    assert scan.rows == scan.fitted == len(bins)
    for got, want in zip(scan.counts, counts, strict=True):
        np.testing.assert_array_equal(got, want)
    dither = row_uniforms(KEYS.dither, 0, *bins.shape)
    np.testing.assert_allclose(total, fg.moment_sum(bins, code, PARAMS, dither), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("chunk_rows", [4_000, 13_333])
def test_statistics_do_not_depend_on_the_chunks_or_the_format(adult_streaming, tmp_path, chunk_rows):
    spec, _, _, code, parquet = adult_streaming
    job = chunk_job(streaming_spec(tmp_path, fraction=0.2, sample_rows=300), KEYS)
    ref_scan, ref_total = two_passes(LocalEngine(spec.data_path, 32_561), job, code)
    for path in (spec.data_path, parquet):
        scan, total = two_passes(LocalEngine(path, chunk_rows), job, code)
        assert (scan.rows, scan.fitted) == (ref_scan.rows, ref_scan.fitted)
        assert all(np.array_equal(a, b) for a, b in zip(scan.counts, ref_scan.counts, strict=True))
        np.testing.assert_allclose(total, ref_total, rtol=1e-12)
        for got, want in zip(scan.samples(), ref_scan.samples(), strict=True):
            assert got.equals(want)


def test_holdout_rows_are_not_fitted(adult_streaming, tmp_path):
    """Fitted + held-out histograms = all rows; the fitted count is Binomial(n, 0.8)."""
    spec, bins, counts, code, _ = adult_streaming
    job = chunk_job(streaming_spec(tmp_path, fraction=0.2), KEYS)
    scan, _ = two_passes(LocalEngine(spec.data_path, 5_000), job, code)
    n = len(bins)
    assert abs(scan.fitted - 0.8 * n) < 4 * np.sqrt(n * 0.16)
    assert all(int(c.sum()) == scan.fitted for c in scan.counts)
    assert all(np.all(c <= full) for c, full in zip(scan.counts, counts, strict=True))
    fitted, held = scan.samples()
    assert len(fitted) == len(held) == 500
    assert not fitted.merge(held, how="inner").shape[0] > len(fitted)  # disjoint rows by position


def _peak_bytes(spec, code, rows_path, chunk_rows):
    job = chunk_job(spec, KEYS)
    tracemalloc.start()
    try:
        two_passes(LocalEngine(rows_path, chunk_rows), job, code)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_grows_with_the_chunk_not_with_n(adult_streaming, tmp_path, monkeypatch):
    """Python/numpy/pandas allocations (tracemalloc) over both passes: 4× the rows at the
    same chunk size may not raise the peak by more than 25 %; 4× the chunk size must raise
    it (the measurement can see growth). GX's validation of a chunk is replaced by the
    records of a passing validation: GX sees one chunk at a time by construction, and
    under tracemalloc it is about 20× slower."""
    import dprelease.expectations.suite as suite

    spec, _, _, code, _ = adult_streaming
    schema = spec.public_schema()
    chunk = to_frame(
        pa.Table.from_pandas(adult_rows(100), preserve_index=False), schema, spec.missing_tokens()
    )
    passing = suite.validate_table(chunk, schema, "input")
    assert all(r["success"] for r in passing[1])
    monkeypatch.setattr(suite, "validate_table", lambda df, schema, name: passing)
    files = {}
    for rows in (6_000, 24_000):
        folder = tmp_path / str(rows)
        folder.mkdir()
        adult_rows(6_000, seed=2).sample(rows, replace=True, random_state=3).to_csv(
            folder / "data.csv", index=False
        )
        files[rows] = folder / "data.csv"
    small = _peak_bytes(spec, code, files[6_000], 1_500)
    large = _peak_bytes(spec, code, files[24_000], 1_500)
    bigger_chunks = _peak_bytes(spec, code, files[24_000], 6_000)
    assert large < 1.25 * small, (small, large)
    assert bigger_chunks > 1.5 * small, (small, bigger_chunks)


def test_line_endings_compression_and_a_missing_final_newline(adult_streaming, tmp_path):
    """The local reader splits the raw bytes at line ends itself: CRLF, a gzipped file and a
    last line without its newline give the same statistics as the plain file."""
    import gzip

    spec, _, _, code, _ = adult_streaming
    job = chunk_job(spec, KEYS)
    ref_scan, ref_total = two_passes(LocalEngine(spec.data_path, 12_000), job, code)
    text = spec.data_path.read_bytes()
    variants = {
        "crlf.csv": text.replace(b"\n", b"\r\n"),
        "no-final-newline.csv": text.rstrip(b"\n"),
        "packed.csv.gz": gzip.compress(text),
    }
    for name, data in variants.items():
        (tmp_path / name).write_bytes(data)
        scan, total = two_passes(LocalEngine(tmp_path / name, 12_000), job, code)
        assert scan.rows == ref_scan.rows, name
        assert all(np.array_equal(a, b) for a, b in zip(scan.counts, ref_scan.counts, strict=True)), name
        np.testing.assert_allclose(total, ref_total, rtol=1e-12)
