"""The streaming tasks (``tasks.streaming``, their bodies through ``.fn``): a full disk
while ``stream_decode`` writes the synthetic chunks is a clear error saying the budget
stays spent. The passes themselves are in tests/engines/test_passes.py; streaming
releases through the flow in tests/flows/test_stream_release.py."""

import errno
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from dprelease.mechanisms import factor_gauss
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.tasks.streaming import stream_decode


def test_a_full_disk_while_writing_synthetic_chunks_is_a_clear_error(adult_streaming, tmp_path, monkeypatch):
    """ENOSPC on the second Parquet chunk: a DPReleaseError naming the folder, the reason and
    what to do, saying the budget stays spent (the noise was drawn before decode)."""
    spec, _, _, code, _ = adult_streaming
    schema = spec.public_schema()
    staging = tmp_path / "out" / ".staging-x"
    (staging / "public").mkdir(parents=True)
    (staging / "internal").mkdir()
    writes = []

    def full(self, table, *args, **kwargs):
        writes.append(len(table))
        if len(writes) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    state = factor_gauss.FactorDraws(np.eye(len(schema)), code, factor_gauss.Refinement((), 0))  # no tables
    with pytest.raises(DPReleaseError) as err:
        stream_decode.fn(
            state,
            schema,
            3_000,
            1_000,
            ["parquet"],
            500,
            staging,
            np.random.default_rng(0),
        )
    message = str(err.value)
    assert message.startswith(f"writing the synthetic data into '{tmp_path / 'out'}' failed: no space left")
    assert "stays spent" in message and "free space on that device" in message
