"""Reading the confidential input the way a release does (the declared ``clip`` and
``other`` policies applied first), and the refusals that name a column and a rule, never a
value or a count: the schema's failing rules, and a table too small for the mechanism,
the checks or δ (n is public under replace-one, so a message may quote it)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from dprelease.engines.header import data_lines
from dprelease.engines.tables import clip_to_bounds, map_unknown, read_table
from dprelease.mechanisms.auto import AUTO
from dprelease.mechanisms.errors import DPReleaseError, InputRefused, InputValidationError
from dprelease.mechanisms.registry import MECHANISMS
from dprelease.mechanisms.rowkeys import RowKeys, held_out
from dprelease.spec import ReleaseSpec, forecast
from dprelease.spec.resources import check_resources

__all__ = [
    "InputRefused",
    "InputValidationError",
    "check_rows",
    "failing_rules",
    "fitted_rows",
    "holdout_split",
    "public_rows",
    "read_input",
    "refuse_input",
    "refuse_output",
    "resolve_mechanism",
]


def failing_rules(records: list[dict]) -> list[dict]:
    """The first failing rule per column (later rules often fail only because of it)."""
    seen, out = set(), []
    for r in records:
        if not r["success"] and r["column"] not in seen:
            seen.add(r["column"])
            out.append(r)
    return out


def refuse_input(failures: list[dict]) -> None:
    """Raise, naming each failing column and its rule (never a count or a value)."""
    if failures:
        lines = [f"column '{f['column']}': {f['rule']}" for f in failures]
        raise InputValidationError(
            "the input breaks the public schema:\n  "
            + "\n  ".join(lines)
            + "\nFix the data or the spec's schema; affected-row counts are in the "
            "internal validation report of the failure record."
        )


def refuse_output(failures: list[dict]) -> None:
    """Raise on a synthetic table that breaks the schema (a bug, never the data's fault)."""
    if failures:
        lines = [f"column '{f['column']}': {f['rule']}" for f in failures]
        raise DPReleaseError("internal error: the synthetic data breaks the schema:\n  " + "\n  ".join(lines))


def read_input(spec: ReleaseSpec, table: pa.Table | None = None) -> tuple[pd.DataFrame, dict | None]:
    """Read the table (the spec's file, or ``table``, an Arrow table in memory: a DataFrame
    the Python API was given, never written to disk) and apply the columns' declared
    policies (``out_of_bounds: clip``, ``unknown: other``) before validation. Returns the
    table and, if any column declares a policy, the per-column counts of changed cells:
    confidential, for ``internal/`` only (never a message, log or public file)."""
    schema = spec.public_schema()
    source = spec.data_path if table is None else table
    df = read_table(source, schema, spec.missing_tokens(), spec.ignored_columns(), spec.one_hot())
    clip, other = spec.clip_columns(), spec.other_tokens()
    if not (clip or other):
        return df, None
    return df, {
        "note": "cells changed by the declared policies before validation (confidential)",
        "out_of_bounds_clipped": clip_to_bounds(df, schema, clip),
        "unknown_mapped_to_other": map_unknown(df, schema, other),
    }


def holdout_split(
    table: pd.DataFrame, fraction: float, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Keep ⌊fraction·n⌋ random rows out of the release, for the membership check and as
    unseen test rows. The split ignores the data, so the release stays DP for the whole
    table (a replaced record is either held out, changing nothing, or a neighbour)."""
    if fraction == 0:
        return table, None
    k = int(fraction * len(table))
    perm = rng.permutation(len(table))
    kept, held = np.sort(perm[k:]), np.sort(perm[:k])
    return table.iloc[kept].reset_index(drop=True), table.iloc[held].reset_index(drop=True)


def fitted_rows(spec: ReleaseSpec, n: int, keys: RowKeys | None = None) -> int:
    """Rows a release of n input rows fits: n − ⌊holdout_fraction·n⌋ on the memory engine
    (``holdout_split``). On a streaming engine, given the release's row ``keys``, n less the
    rows its per-row coin holds out (``rowkeys.held_out``: the keys and n decide it, no row
    is read); without them, the memory engine's count (a preview: ``dprelease validate``)."""
    if spec.engine.streaming and keys is not None:
        return n - held_out(keys.holdout, n, spec.checks.holdout_fraction)
    return n - int(spec.checks.holdout_fraction * n)


def public_rows(spec: ReleaseSpec) -> int:
    """The input's n without parsing a value (``header.data_lines``: a Parquet footer, or a
    CSV file's lines), public under replace-one: what ``mechanism: auto`` chooses on, and
    what a forecast of the release may use. Counting reads the file, so a release calls
    it after the ledger's pre-check; its only outcomes are n or an error naming the file's
    kind, whatever a record holds. The readers must then find n records (``check_rows``)."""
    return data_lines(spec.data_path)


def resolve_mechanism(spec: ReleaseSpec, keys: RowKeys | None = None) -> ReleaseSpec:
    """The spec with ``mechanism: auto`` resolved (``ReleaseSpec.resolve``) on the public n
    (``public_rows``) and the rows the release fits (``fitted_rows``; ``keys``: a streaming
    release's row keys, so the rule sees the very count it fits). A release calls it after
    the ledger's pre-check and before the rehearsal and the reserve. A spec that names its
    mechanism is returned as it is, without opening the file."""
    if spec.mechanism.name != AUTO:
        return spec
    n = public_rows(spec)
    return spec.resolve(fitted_rows(spec, n, keys), rows=n)


def check_rows(spec: ReleaseSpec, n: int, fitted: int | None = None) -> list[str]:
    """Refuse, before any noise is drawn, a table of n rows that is too small for the
    mechanism (``Synthesizer.min_rows`` on the fitted rows), for the post-release checks,
    for ``privacy.delta`` (δ ≥ 1/n), or for the budget: noise whose s.d. per count reaches
    the fitted rows (``spec.forecast``, from public facts); under ``mechanism: auto``, one
    whose reader found other than the n lines the rule counted (``public_rows``), so that the
    n and fitted rows the rule chose on are the release's. n is public under replace-one,
    so the message may quote it. ``fitted``: the streaming engines' fitted count (their
    holdout coin is per row); default n − ⌊holdout_fraction·n⌋. Returns the forecast's
    warnings (columns the noise will blur badly, and the ε that would not). Last, the
    resource forecast with n (``spec.resources.check_resources``): ``ResourceRefused``."""
    choice = spec.auto_choice
    if choice is not None and choice.rows != n:
        raise InputValidationError(
            "mechanism auto chose on the input's lines, counted before the budget was reserved, but the "
            "reader found another number of records: a value holds a line break, or a line holds only "
            "spaces. Make each record one line without line breaks in values, or name the mechanism in "
            "the spec; nothing was spent."
        )
    if n < 1:
        raise InputValidationError("the input has no data rows; nothing was spent")
    synth = MECHANISMS[spec.mechanism.name]
    fitted = fitted_rows(spec, n) if fitted is None else fitted
    if choice is not None and choice.n_fitted != fitted:
        raise DPReleaseError(
            f"internal error: mechanism auto chose on {choice.n_fitted} fitted rows; "
            f"the release fits {fitted}"
        )
    fraction = spec.checks.holdout_fraction
    held = f" ({n - fitted} held out by checks.holdout_fraction {fraction:g})" if fraction else ""
    more = "supply more rows" + (" or lower checks.holdout_fraction" if fraction else "")
    problems = []
    need = synth.min_rows(spec.public_schema(), spec.mechanism_params())
    if fitted < need:
        problems.append(
            f"mechanism {synth.name} needs at least {need} fitted rows (min_rows); the input has {n} "
            f"rows, {fitted} fitted{held}: {more}"
        )
    if spec.checks.enabled:
        m = spec.synthetic_rows or fitted
        if fitted < 2:
            problems.append(
                f"checks.enabled: the post-release checks need at least 2 fitted rows, got {fitted}{held}: "
                f"{more}, or set checks.enabled: false"
            )
        if m < 2:
            problems.append(
                f"synthetic_rows ({m}): the post-release checks need at least 2 synthetic rows; "
                "raise synthetic_rows or set checks.enabled: false"
            )
        if fraction and n - fitted < 1:
            problems.append(
                f"checks.holdout_fraction ({fraction:g}) keeps no row out of {n} (⌊{fraction:g}·{n}⌋ = 0), "
                "so the checks would test on an empty holdout: raise it, set it to 0, or supply more rows"
            )
    delta = spec.privacy.delta
    if delta > 0 and delta >= 1 / n:
        problems.append(
            f"privacy.delta ({delta:g}) must be below 1/n = {1 / n:.3g} for the n = {n} input rows: "
            "with δ ≥ 1/n a mechanism may publish a whole record in the clear and still be "
            f"(ε, δ)-DP. Set privacy.delta ≤ 1/(10 n) = {1 / (10 * n):.3g} or smaller"
        )
    ahead = forecast(spec, fitted) if fitted >= 1 else None
    if ahead is not None and ahead.refuse is not None:
        problems.append(ahead.refuse)
    if problems:
        raise InputValidationError(
            f"this release cannot run on the input's {n} rows:\n  "
            + "\n  ".join(problems)
            + "\nNothing was spent."
        )
    check_resources(spec, fitted)  # the memory and time forecast, now with n (public)
    return [] if ahead is None else ahead.warnings
