"""Streaming engines: run a per-chunk function over the input and combine the results.

``LocalEngine`` reads the chunks one after another in this process (memory: one chunk
plus the running result). ``DaskEngine`` maps the same function over byte ranges (CSV,
whole lines by fsspec's ``read_block``, the splitter behind ``dask.dataframe.read_csv``)
or row groups (Parquet) on a Dask cluster and combines the
partial results pairwise on the workers, so only the final one travels to this process.
Both hand the function the chunk's first global row index (Dask needs a first counting
pass for a CSV input to know it; a Parquet footer states it), which keys all per-row
randomness (``mechanisms.rowkeys``). A byte offset would spare that pass but cannot be the
key: it depends on the lengths of the records before the row, so replacing one record
would move every later row's holdout coin and dither. No noise is drawn here: the flow adds it to the
combined statistic, once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from dprelease.engines.chunks import block_bytes, local_chunks, read_csv_range, read_row_group
from dprelease.engines.tables import input_format
from dprelease.mechanisms.errors import DPReleaseError, WorkerError
from dprelease.spec import EngineSpec

__all__ = ["DaskEngine", "LocalEngine", "open_engine"]

R = TypeVar("R")
CONNECT_TIMEOUT = "30s"
ChunkFn = Callable[[pa.Table, int], R]
Progress = Callable[[int], None]


class LocalEngine:
    """Chunks of about ``chunk_rows`` rows, read in order by this process."""

    name = "local"

    def __init__(self, path: Path, chunk_rows: int) -> None:
        self.path, self.chunk_rows = path, chunk_rows

    def run(self, fn: ChunkFn, combine: Callable[[R, R], R], progress: Progress | None = None) -> R:
        """combine(… combine(fn(chunk₀, 0), fn(chunk₁, n₀)) …), one chunk in memory at a time."""
        result, start = None, 0
        for table in local_chunks(self.path, self.chunk_rows):
            part = fn(table, start)
            result = part if result is None else combine(result, part)
            start += table.num_rows
            if progress is not None:
                progress(start)
        if result is None:
            raise DPReleaseError(f"dataset file '{self.path}' has no data rows")
        return result

    def describe(self) -> dict[str, Any]:
        """Public facts: the engine and its settings. Never the number of chunks: it follows
        from the file's byte length, which the data determines."""
        return {"name": self.name, "chunk_rows": self.chunk_rows}

    def close(self) -> None:
        """Nothing to release."""


def _count(table: pa.Table, start: int) -> int:
    return table.num_rows


def _call(fn: ChunkFn, load: Callable[..., pa.Table], args: tuple, start: int) -> Any:
    """fn on one chunk, on a worker; an unexpected error leaves it as a ``WorkerError``."""
    try:
        return fn(load(*args), start)
    except DPReleaseError:
        raise
    except Exception as e:
        raise WorkerError(
            f"a chunk failed on a Dask worker ({type(e).__name__}); rerun with engine.name: local to "
            "keep the cause in the failure record's internal/traceback.txt"
        ) from None


def _tree(parts: list, combine: Callable) -> Any:
    """Pairwise combination as a balanced tree of delayed calls (runs on the workers)."""
    from dask import delayed

    while len(parts) > 1:
        paired = [delayed(combine)(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = paired + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


class DaskEngine:
    """The same passes on a Dask cluster: ``scheduler`` (an address) or a LocalCluster of
    ``workers`` single-threaded processes. Workers must be able to read the dataset path
    (a shared file system)."""

    name = "dask"

    def __init__(self, path: Path, chunk_rows: int, scheduler: str | None, workers: int | None) -> None:
        from distributed import Client, LocalCluster

        self.path, self.chunk_rows, self.scheduler = path, chunk_rows, scheduler
        self.cluster: Any = None
        self._lengths: list[int] | None = None
        try:
            if scheduler is None:
                self.cluster = LocalCluster(  # no dashboard; the scheduler's HTTP routes on a free port
                    n_workers=workers or 2,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                )
                self.client = Client(self.cluster)
            else:
                self.client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            if self.cluster is not None:
                self.cluster.close()
            raise DPReleaseError(
                f"engine.scheduler: could not connect to the Dask scheduler ({type(e).__name__}); check the "
                "address (tcp://host:8786) and that the scheduler is running; nothing was read or spent"
            ) from None
        self.workers = len(self.client.scheduler_info(n_workers=-1)["workers"])
        self._pieces = self._split()
        self._starts: list[int] | None = None

    def _split(self) -> list[tuple[Callable[..., pa.Table], tuple]]:
        """(loader, its arguments) per chunk: byte ranges of whole lines (one range for a
        gzipped file, which cannot be entered in the middle), or Parquet row groups."""
        if input_format(self.path) == "parquet":
            meta = pq.ParquetFile(self.path).metadata
            self._lengths = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            return [(read_row_group, (str(self.path), i)) for i in range(meta.num_row_groups)]
        self._lengths = None
        path = str(self.path)
        if self.path.suffix.lower() == ".gz":
            return [(read_csv_range, (path, 0, None))]
        size, step = self.path.stat().st_size, block_bytes(self.path, self.chunk_rows)
        return [(read_csv_range, (path, off, step)) for off in range(0, size, step)]

    def _first_rows(self) -> list[int]:
        """Each chunk's first global row index: a counting pass for CSV (once per release)."""
        if self._starts is None:
            from dask import delayed

            lengths = self._lengths
            if lengths is None:
                counts = [delayed(_call)(_count, load, args, 0) for load, args in self._pieces]
                lengths = list(self.client.compute(counts, sync=True))
            self._starts = [sum(lengths[:i]) for i in range(len(lengths))]
            self._total = sum(lengths)
        return self._starts

    def run(self, fn: ChunkFn, combine: Callable[[R, R], R], progress: Progress | None = None) -> R:
        from dask import delayed

        starts = self._first_rows()
        if self._total == 0:
            raise DPReleaseError(f"dataset file '{self.path}' has no data rows")
        pieces = zip(self._pieces, starts, strict=True)
        parts = [delayed(_call)(fn, load, args, start) for (load, args), start in pieces]
        result = self.client.compute(_tree(parts, combine), sync=True)
        if progress is not None:
            progress(self._total)
        return result

    def describe(self) -> dict[str, Any]:
        """Public facts, as ``LocalEngine.describe`` (no chunk count)."""
        return {
            "name": self.name,
            "chunk_rows": self.chunk_rows,
            "workers": self.workers,
            "cluster": "LocalCluster" if self.scheduler is None else "scheduler (address not published)",
            "counting_pass": self._lengths is None,
        }

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def open_engine(engine: EngineSpec, path: Path) -> LocalEngine | DaskEngine:
    """The spec's streaming engine for the dataset at ``path`` (closed by the caller)."""
    input_format(path)  # a missing or misnamed file is an error before any cluster starts
    if engine.name == "local":
        return LocalEngine(path, engine.chunk_rows)
    return DaskEngine(path, engine.chunk_rows, engine.scheduler, engine.workers)
