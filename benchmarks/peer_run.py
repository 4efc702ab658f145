"""The peer baselines of items 5 and 15, run from the project's venv: the public cells every peer
gets, one fit + sample in the peer's own venv, the budget checks on what it reports, and the
decoding of its cells.

The peers are the maintained implementations (issue 33), each in its own venv made by
``benchmarks/peer_envs.sh``:

- ``dpmm_aim``, ``dpmm_mst``, ``dpmm_privbayes``: dpmm 0.1.9's pipelines (its vendored
  Private-PGM), through ``peer_dpmm.py`` in ``.venv-dpmm``;
- ``mbi_mst``: our MST after the reference ``mechanisms/mst.py`` of ``ryan112358/mbi`` on
  mbi 2.0 (Private-PGM on JAX), ``peer_mbi.py`` in ``.venv-mbi``.

**The public cells** (``peer_schema``): every peer gets the same cells, from the table's spec
and a public rule (the issue's protocol), never from the data: a continuous column whose range
holds at most ``PEER_INTERVALS`` integers gets one cell per integer; a declared finite support
(``values``) of at most ``PEER_INTERVALS`` points one cell per point; any other continuous column
``PEER_INTERVALS`` equal-width intervals over its declared bounds, on its declared scale (log1p
for ``transform: log``), plus one cell per declared atom (public, so the peers get it too); a
declared missing cell stays; levels and categories as declared. The helper reads only the cell
indices and the cell counts. A peer's cells are decoded by the same ``bins_to_table`` for every
peer: an atom's or an integer's cell to its value, an interval by a uniform draw inside it
(rounded for integers, to the declared ``decimals``), snapped to the nearest declared value
when the column declares more than ``PEER_INTERVALS`` ``values``.

**The budget** (``check_budget``, asserted on every run): the (ε, δ) the peer was given is the
run's; no preprocessing ε spent (dpmm: ``proc_epsilon=None``, every column's spent ε None or 0,
no column dropped or imputed by its binner, its cell counts the public ones); the ρ the peer
spent at most the ρ its own accounting allows (its ``cdp_rho`` of (ε, δ)); that ρ and ours
(``mechanisms.accounting.zcdp_rho``) are both recorded.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from common import REPO

from dprelease.engines.tables import bins_to_table, table_to_bins
from dprelease.mechanisms.accounting import zcdp_rho
from dprelease.mechanisms.schema import Continuous, Schema

HERE = Path(__file__).resolve().parent
PEER_INTERVALS = 32
RHO_RTOL = 1e-6
"""Relative tolerance between a peer's ρ for (ε, δ) and ours (both bisect the same bound)."""
ENVS_SCRIPT = "bash benchmarks/peer_envs.sh"


@dataclass(frozen=True)
class Peer:
    label: str
    venv: str  # relative to the repository
    helper: str  # in benchmarks/
    algorithm: str

    @property
    def python(self) -> Path:
        return REPO / self.venv / "bin" / "python"


PEERS: dict[str, Peer] = {
    "dpmm_aim": Peer("dpmm AIM", ".venv-dpmm", "peer_dpmm.py", "aim"),
    "dpmm_mst": Peer("dpmm MST", ".venv-dpmm", "peer_dpmm.py", "mst"),
    "dpmm_privbayes": Peer("dpmm PrivBayes", ".venv-dpmm", "peer_dpmm.py", "privbayes"),
    "mbi_mst": Peer("mbi 2.0 MST (reference mst.py)", ".venv-mbi", "peer_mbi.py", "mst"),
}
TIMED_OUT = ("dpmm_aim",)
"""Peers killed after the AIM timeout (the others finish in minutes)."""


def require_venvs(keys: list[str]) -> None:
    """Stop, naming the venv and the command that makes it, when a peer's python is missing."""
    missing = sorted({PEERS[k].venv for k in keys if not PEERS[k].python.is_file()})
    if missing:
        raise SystemExit(f"peer venv(s) {', '.join(missing)} not found; create them with\n  {ENVS_SCRIPT}")


# ---------------------------------------------------------------------------------------- cells


def _peer_column(c: Continuous) -> tuple[Continuous, tuple[float, ...]]:
    """(the column's public peer cells, the declared values to snap decoded values to)."""
    if c.values is not None and len(c.values) <= PEER_INTERVALS:
        return c, ()
    n_int = math.floor(c.upper) - math.ceil(c.lower) + 1
    if c.integer and n_int <= PEER_INTERVALS:
        return dataclasses.replace(c, atoms=(), intervals=None), ()
    snap = tuple(sorted(c.values)) if c.values is not None else ()
    return dataclasses.replace(c, values=None, intervals=PEER_INTERVALS), snap


def peer_schema(schema: Schema) -> tuple[Schema, dict[str, tuple[float, ...]]]:
    """The peers' public cells of a spec's schema (module doc), and the declared values that
    decoded values of some columns snap to."""
    cols, snaps = [], {}
    for c in schema.columns:
        if isinstance(c, Continuous):
            c, snap = _peer_column(c)
            if snap:
                snaps[c.name] = snap
        cols.append(c)
    return Schema(tuple(cols)), snaps


def decode(
    cells: np.ndarray, schema: Schema, snaps: dict[str, tuple[float, ...]], rng: np.random.Generator
) -> pd.DataFrame:
    """A peer's synthetic cells → values, the same way for every peer (module doc)."""
    out = bins_to_table(cells, schema, rng=rng)
    for name, points in snaps.items():
        grid = np.asarray(points, dtype=float)
        x = out[name].to_numpy(dtype=float)
        idx = np.clip(np.searchsorted(grid, x), 1, len(grid) - 1)
        left = grid[idx - 1]
        out[name] = np.where(np.abs(x - left) <= np.abs(grid[idx] - x), left, grid[idx])
    return out


def write_inputs(work: Path, train: pd.DataFrame, schema: Schema) -> None:
    """The training rows as public-cell indices (CSV) and the public domain (JSON) in ``work``."""
    pd.DataFrame(table_to_bins(train, schema), columns=schema.names).to_csv(
        work / "train_cells.csv", index=False
    )
    (work / "domain.json").write_text(json.dumps({"columns": schema.names, "n_bins": schema.n_bins}))


# ---------------------------------------------------------------------------------------- a run


def _progress(log: str) -> dict[str, Any]:
    """AIM's rounds done when killed (``peer_dpmm.py`` prints one ``round`` line per round)."""
    rounds = [ln for ln in log.splitlines() if ln.startswith("round ")]
    return {"rounds_done": len(rounds), "rounds_planned": int(rounds[-1].split("/")[-1]) if rounds else None}


def run_peer(
    key: str, work: Path, eps: float, delta: float, seed: int, timeout_s: float | None
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """One fit + sample of peer ``key`` in its venv on the inputs in ``work`` (killed with its
    process group after ``timeout_s``); its budget is checked (``check_budget``) before its
    cells are returned."""
    peer = PEERS[key]
    tag = f"{key}_{eps:g}_{seed}"
    out, info, log = (work / f"{tag}{s}" for s in (".csv", ".json", ".log"))
    rho_ours = zcdp_rho(eps, delta)
    cmd = [
        str(peer.python),
        str(HERE / peer.helper),
        "--algorithm",
        peer.algorithm,
        "--domain",
        str(work / "domain.json"),
        "--train",
        str(work / "train_cells.csv"),
        "--out",
        str(out),
        "--info",
        str(info),
        "--epsilon",
        repr(eps),
        "--delta",
        repr(delta),
        "--rho",
        repr(rho_ours),
        "--seed",
        str(seed),
    ]
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "JAX_ENABLE_COMPILATION_CACHE": "false",
    }
    t0 = time.perf_counter()
    with log.open("w") as log_f:
        proc = subprocess.Popen(cmd, stdout=log_f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the helper's own process group (start_new_session)
            proc.wait()
            return None, {
                "status": "timeout",
                "timeout_s": timeout_s,
                "wall_s": time.perf_counter() - t0,
                **_progress(log.read_text(errors="replace")),
            }
    wall_s = time.perf_counter() - t0
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        print(f"    {key} failed (exit {rc}):\n      " + "\n      ".join(tail), flush=True)
        return None, {"status": "error", "exit_code": rc, "log_tail": tail, "wall_s": wall_s}
    result = json.loads(info.read_text())
    check_budget(result, eps, delta, rho_ours)
    result.update(status="ok", wall_s=wall_s, rho_ours=rho_ours)
    return pd.read_csv(out, dtype="int64").to_numpy(dtype=np.int32), result


def check_budget(info: dict[str, Any], eps: float, delta: float, rho_ours: float) -> None:
    """The budget a peer reports: the (ε, δ) given, no preprocessing ε (none given, none spent
    by any column), the ρ its measurements and selections spent within the ρ its accounting
    allows them (``rho_limit``: its ρ for (ε, δ), or for PrivBayes for (ε/2, δ), the other ε/2
    going to its pure-DP selection), and its ρ for (ε, δ) equal to ours (to ``RHO_RTOL``).
    Raises AssertionError otherwise."""
    b = info["budget"]
    assert (b["epsilon"], b["delta"]) == (eps, delta), f"the peer ran with {b['epsilon']}, {b['delta']}"
    assert b["proc_epsilon"] in (None, 0, 0.0), f"preprocessing ε {b['proc_epsilon']} given to the peer"
    spent_pre = b["preprocessing_epsilon"]
    assert all(v in (None, 0, 0.0) for v in spent_pre.values()), f"preprocessing ε spent: {spent_pre}"
    assert b["rho_spent"] <= b["rho_limit"] * (1 + 1e-9), f"ρ spent {b['rho_spent']} > ρ {b['rho_limit']}"
    assert math.isclose(b["rho_peer"], rho_ours, rel_tol=RHO_RTOL), (
        f"the peer's ρ {b['rho_peer']} for ({eps}, {delta}) differs from ours {rho_ours}"
    )
