"""The Python API: a release spec, a release, and a synthesis for exploration, pandas in and out.

``release`` runs the same road as ``dprelease release`` (``flows/run.py``): the checks that
read no data value (spec, release id, output folder, the ledger's refusal, the data file's
header), then the release flow against one temporary Prefect server kept for the life of
the Python process (or the server of ``PREFECT_API_URL``), the same ledger and the same
bundle. ``synthesize`` runs the mechanism in-process, with no ledger and no Prefect: its
output is marked not fit for publication.

Example:
    >>> import dprelease
    >>> spec = dprelease.Spec.demo()
    >>> spec.dataset, spec.mechanism, spec.epsilon
    ('adult', 'factor_gauss', 1.0)
    >>> r = dprelease.release(spec, out="releases")  # doctest: +SKIP
    >>> r.synthetic.head()  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from dprelease._terms import as_api_error
from dprelease.engines.frames import frame_input, write_frame
from dprelease.engines.inputs import InputRefused
from dprelease.errors import DPReleaseError, SpecError, UnexpectedFailure
from dprelease.flows import DEMO_SPEC as _DEMO
from dprelease.ledger import DatasetAccount
from dprelease.mechanisms.accounting import shown_up
from dprelease.records.query import QueryResult
from dprelease.spec import ReleaseSpec, load_spec, spec_from_mapping
from dprelease.spec.document import plain_document, spec_text

__all__ = ["NotForPublication", "Release", "Spec", "query", "release", "synthesize"]

_log = logging.getLogger("dprelease")

_MAPPING = "(a Python mapping)"


@dataclass(frozen=True)
class Spec:
    """A release spec, validated as ``dprelease validate`` and ``dprelease release`` validate
    it (``spec.load_spec``): every error names its field.

    Attributes:
        model: The validated spec (``dprelease.spec.ReleaseSpec``).
        source: Where it came from: the YAML file's path, or ``(a Python mapping)``.
    """

    model: ReleaseSpec
    source: str
    _raw: Mapping[str, Any]

    @classmethod
    def load(cls, spec: str | os.PathLike[str] | Mapping[str, Any]) -> Spec:
        """Read and validate a spec: a YAML file, or a mapping of the same fields.

        A file's relative ``dataset.path`` resolves against the file's folder; a mapping's
        against the current directory. A mapping meets a file's limits (``spec.document``): at
        most 16 levels deep, 200,000 values and 2,000,000 characters of text, a list or
        mapping used in several places counted in each, none holding itself; its keys are
        text; numpy numbers, ``Decimal`` and ``Fraction`` are read as the float or int they
        are, so that the spec file ``release`` writes reads back as the same spec.

        Args:
            spec: The path of a release YAML, or a dict of its fields.

        Returns:
            The validated spec.

        Raises:
            SpecError: The spec breaks a rule; the message names each field and its rule, as
                ``dprelease validate`` prints it.
        """
        if isinstance(spec, Mapping):
            raw = plain_document(spec, _MAPPING)
            return cls(spec_from_mapping(raw, Path.cwd(), _MAPPING), _MAPPING, raw)
        if not isinstance(spec, str | os.PathLike):
            raise SpecError(
                f"spec must be a Spec, the path of a release YAML or a mapping of its fields, not "
                f"{type(spec).__name__}"
            )
        from dprelease.spec import read_spec_mapping

        path = Path(spec)
        model = load_spec(path)
        return cls(model, str(path), read_spec_mapping(path))

    @classmethod
    def demo(cls) -> Spec:
        """The embedded demo: UCI Adult, factor_gauss, ε = 1, δ = 1e-6 (``dprelease demo``).

        >>> Spec.demo().columns[:3]
        ['age', 'workclass', 'fnlwgt']
        """
        return cls.load(_DEMO)

    @property
    def dataset(self) -> str:
        """``dataset.name``: the name the ledger charges."""
        return self.model.dataset.name

    @property
    def data_path(self) -> Path:
        """The data file the spec names (a relative path resolved)."""
        return self.model.data_path

    @property
    def columns(self) -> list[str]:
        """The modelled columns, in the schema's order."""
        return list(self.model.public_schema().names)

    @property
    def mechanism(self) -> str:
        """``mechanism.name`` (``auto`` until a release resolves it on the input's row count)."""
        return self.model.mechanism.name

    @property
    def epsilon(self) -> float:
        """``privacy.epsilon``."""
        return self.model.privacy.epsilon

    @property
    def delta(self) -> float:
        """``privacy.delta``."""
        return self.model.privacy.delta

    def with_data(self, data: str | os.PathLike[str]) -> Spec:
        """This spec with ``dataset.path`` replaced by ``data`` (made absolute)."""
        raw = {
            **copy.deepcopy(dict(self._raw)),
            "dataset": {**self._raw["dataset"], "path": str(Path(data).resolve())},
        }
        return Spec(spec_from_mapping(raw, Path.cwd(), self.source), self.source, raw)

    def _write(self, path: Path) -> Path:
        """The spec as a file the flow reads (``spec_text``: JSON, which YAML reads back as the
        same document), its dataset path absolute."""
        raw = {**self._raw, "dataset": {**self._raw["dataset"], "path": str(self.data_path.resolve())}}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(spec_text(raw))
        return path

    def __repr__(self) -> str:
        return f"Spec({self.source!r}: dataset {self.dataset!r}, {self.mechanism}, epsilon={self.epsilon:g})"


@dataclass(frozen=True)
class Release:
    """A published release: its bundle, what it spent and the dataset's lifetime account.

    Attributes:
        path: The bundle folder, ``<out>/<release_id>``.
        release_id: The release's id.
        dataset: ``dataset.name``.
        accountant: ``zcdp`` or ``pure``.
        epsilon: The release's ε (its (ε, δ)-DP statement, replace-one neighbours).
        delta: The release's δ.
        rho: Its ρ under zCDP (None for a pure-DP release).
        statement: The privacy statement of ``release.json``.
        accuracy: Per noisy statistic, the error its noise implies (``privacy.accuracy``).
        fit_for_publication: False when made with ``insecure_seed``.
        account: The dataset's lifetime account in the ledger, after this release.
        document: The whole ``public/release.json``.
    """

    path: Path
    release_id: str
    dataset: str
    accountant: str
    epsilon: float
    delta: float
    rho: float | None
    statement: str
    accuracy: list[dict]
    fit_for_publication: bool
    account: DatasetAccount
    document: dict

    @classmethod
    def _of(cls, bundle: Path, ledger_url: str) -> Release:
        from dprelease.bundle.release_doc import ReleaseDocument
        from dprelease.ledger import show

        doc = ReleaseDocument.from_file(bundle / "public" / "release.json")
        priv, totals = doc.privacy, doc.privacy.ledger.totals
        return cls(
            bundle,
            doc.release_id,
            doc.dataset,
            priv.accountant,
            shown_up(totals.epsilon),
            shown_up(totals.delta),
            None if totals.rho is None else shown_up(totals.rho),
            priv.statement,
            [a.as_mapping() for a in priv.accuracy or ()],
            doc.randomness.fit_for_publication,
            show(ledger_url, dataset=doc.dataset).accounts[doc.dataset],
            doc.as_mapping(),
        )

    @functools.cached_property
    def synthetic(self) -> pd.DataFrame:
        """The published synthetic table, read from the bundle on first use (Parquet when the
        release wrote it, else CSV)."""
        outputs = self.document.get("outputs") or {}
        parquet = [n for n, o in outputs.items() if o.get("format") == "parquet"]
        if parquet:
            return pd.read_parquet(self.path / "public" / parquet[0])
        csv = [n for n, o in outputs.items() if o.get("format") == "csv"] or ["synthetic.csv"]
        return pd.read_csv(self.path / "public" / csv[0])

    @functools.cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The noisy count tables the release published (``public/tables/``), by statistic
        name: one row per cell, labelled in the schema's terms, with ``noisy_count``, ``se``,
        ``lower``/``upper`` and the ``combined_*`` estimate (``tables/index.json`` says how).
        Empty for a release made before tables were published."""
        index = self.path / "public" / "tables" / "index.json"
        if not index.is_file():
            return {}
        entries = json.loads(index.read_text(encoding="utf-8"))["tables"]
        return {
            e["name"]: pd.read_csv(self.path / "public" / e["file"], keep_default_na=False) for e in entries
        }

    @property
    def report_path(self) -> Path | None:
        """``public/report.html``, the analyst's report built from the published files only
        (the measured tables with their error bars, what the data is fit for), or None for a
        release that published no tables (a gate stopped it, or made before reports)."""
        path = self.path / "public" / "report.html"
        return path if path.is_file() else None

    def query(self, where: Mapping[str, Any], *, level: float = 0.9) -> QueryResult:
        """The count of fitted rows meeting ``where``, with its interval: :func:`query`."""
        return query(self, where, level=level)

    def __repr__(self) -> str:
        rho = "" if self.rho is None else f", rho={self.rho:.4g}"
        seed = "" if self.fit_for_publication else ", NOT FIT FOR PUBLICATION (insecure seed)"
        return (
            f"Release({self.release_id!r} of {self.dataset!r}: ({self.epsilon:.4g}, {self.delta:.3g})-DP"
            f"{rho}; bundle {str(self.path)!r}{seed})"
        )


class NotForPublication(UserWarning):
    """A table made by ``synthesize``: exploration only, never to be published."""


@contextmanager
def _private_folder() -> Iterator[Path]:
    """A folder only this user can read (0700), removed with what it holds."""
    folder = Path(tempfile.mkdtemp(prefix="dprelease-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _data_file(source: Path | pa.Table, folder: Path) -> Path:
    """``frame_input``'s answer as a file the engines read: a path as it is; a DataFrame's
    table written to Parquet in ``folder`` (0600), which keeps its column types (numbers,
    text, missing values) as given."""
    return source if isinstance(source, Path) else write_frame(source, folder)


def _as_spec(spec: Spec | str | os.PathLike[str] | Mapping[str, Any]) -> Spec:
    return spec if isinstance(spec, Spec) else Spec.load(spec)


def release(
    spec: Spec | str | os.PathLike[str] | Mapping[str, Any],
    data: pd.DataFrame | str | os.PathLike[str] | None = None,
    *,
    out: str | os.PathLike[str] = "releases",
    ledger: str | None = None,
    release_id: str | None = None,
    insecure_seed: int | None = None,
    new_dataset: str | None = None,
) -> Release:
    """Run a release, as ``dprelease release`` does: reserve the budget in the ledger, read
    and validate the data, synthesise, run the gates and checks, write the bundle.

    What can be refused without reading a data value is refused first, before Prefect is
    used: nothing is then read or spent. Prefect runs against one temporary server started by
    the first release and kept until the Python process exits (``PREFECT_API_URL``, when set,
    names a running server instead).

    Args:
        spec: A :class:`Spec`, or what :meth:`Spec.load` takes.
        data: The confidential table, replacing the spec's ``dataset.path``: a pandas
            DataFrame (written to a private temporary Parquet file, removed afterwards, so its
            column types are kept) or the path of a CSV/Parquet file. Default: the spec's file.
            A DataFrame's columns are checked first (``engines.frames``): names of text, each
            once; numbers, booleans, text or dates (an ``object`` column of one kind).
        out: The folder that receives ``<release_id>/public``, ``<release_id>/internal`` and
            ``failures/``, and by default the ledger ``ledger.db``.
        ledger: The budget ledger: a database URL, a SQLite file, or a folder holding
            ``ledger.db`` (default ``sqlite:///OUT/ledger.db``).
        release_id: Override the spec's ``release_id`` (default: the spec's, else
            ``<dataset>-<UTC time>``).
        insecure_seed: Fix the noise seed (numpy's samplers instead of OpenDP's): the bundle
            then says it is not fit for publication.
        new_dataset: Why this dataset is new although another dataset name in the ledger has
            the same public schema (column names and kinds), e.g. ``"the 2026 survey wave: a
            new sample"``; recorded in the ledger. Without it such a release is refused:
            a new name for the same data would start a fresh budget.

    Returns:
        The published release.

    Raises:
        SpecError: The spec breaks a rule.
        DataError: ``data`` is not a DataFrame or a path, or a DataFrame holds a column the
            engines cannot read (the message names each column and its rule); raised before
            Prefect starts: nothing was reserved, read or spent.
        BudgetRefused: The ledger refuses the release (its budget policy, a release_id that
            already spent, or another dataset name with the same schema without
            ``new_dataset``); nothing was read or spent.
        ReleaseIdTaken: The release's folder exists.
        InputRefused: The data breaks the public schema; its message names the columns and
            rules (you passed the data: Prefect's records never hold them); nothing was spent.
        GateError: A gate stopped the release: the budget was spent, nothing was published.
        UnexpectedFailure: Anything else; nothing was published (the failure record in
            ``<out>/failures/`` holds the traceback).
    """
    s, folder = _as_spec(spec), Path(out)
    source = None if data is None else frame_input(data)  # refused here, before Prefect is imported
    from dprelease.flows import run

    run.prefect_logging(verbose=False)  # before this call imports Prefect, if nothing did
    from dprelease.flows.prefect_server import process_api
    from dprelease.ledger import ledger_url

    try:
        with _private_folder() as tmp:
            if source is not None:
                s = s.with_data(_data_file(source, tmp))
            spec_file = s._write(tmp / "spec.yaml")
            url = run.flow_ledger(ledger, folder)
            run.before_prefect(spec_file, folder, release_id, url, say=_log.info, new_dataset=new_dataset)
            try:
                bundle = run.run_flow(
                    spec_file,
                    folder,
                    release_id,
                    insecure_seed,
                    url,
                    api=process_api,
                    warn=_warn,
                    new_dataset=new_dataset,
                )
            except InputRefused as e:  # the caller passed the data: the column and the rule, as the CLI shows
                raise e.told() from None
            except DPReleaseError:
                raise
            except Exception as e:  # Prefect's own, outside the flow's body: recorded as the docs say
                record = run.record_not_started(e, spec_file, folder, release_id, "prefect")
                raise UnexpectedFailure(
                    f"the release failed unexpectedly ({type(e).__name__}); the failure record is {record}"
                ) from e
    except DPReleaseError as e:  # worded for the command line: named as this call's arguments
        as_api_error(e)
        raise
    except Exception as e:  # a bug: the type only (its message may quote anything)
        raise UnexpectedFailure(f"the release failed unexpectedly ({type(e).__name__})") from e
    return Release._of(bundle, url or ledger_url(None, folder))


def _warn(text: str) -> None:
    warnings.warn(text, RuntimeWarning, stacklevel=3)


def synthesize(
    data: pd.DataFrame | str | os.PathLike[str],
    spec: Spec | str | os.PathLike[str] | Mapping[str, Any],
    *,
    seed: int | None = None,
) -> pd.DataFrame:
    """Fit the spec's mechanism on ``data`` in this process and draw a synthetic table, for
    exploration only: no ledger, no Prefect, no bundle, nothing recorded.

    The data is read and validated as a release reads it (the spec's policies, the public
    schema's rules, the row-count refusals), the budget split as a release splits it, and the
    mechanism fitted on every row (no holdout). The result is NOT a release: nothing was
    charged to the dataset's budget, so publishing it, or running this repeatedly on the
    same data, spends privacy no ledger accounts for. It is marked so:
    ``df.attrs["dprelease"]["fit_for_publication"]`` is False, and a
    :class:`NotForPublication` warning is raised.

    Args:
        data: The table: a pandas DataFrame or the path of a CSV/Parquet file.
        spec: A :class:`Spec`, or what :meth:`Spec.load` takes.
        seed: Fix the noise (numpy's samplers) for a reproducible draw; default OS entropy
            through OpenDP's samplers, as a release draws.

    Returns:
        The synthetic table, with the columns a release publishes.

    Raises:
        SpecError: The spec breaks a rule.
        DataError: ``data`` is not a DataFrame or a path, a DataFrame holds a column the
            engines cannot read, or the data breaks the public schema (the message names the
            columns and rules), or has too few rows for the mechanism.
    """
    from dprelease.bundle.published import Layout, publishable
    from dprelease.engines.road import fit_table
    from dprelease.mechanisms.primitives import release_streams

    given = _as_spec(spec)
    source = frame_input(data)
    if isinstance(source, Path):
        given = given.with_data(source)
    fitted = fit_table(given.model, None if isinstance(source, Path) else source, release_streams(seed))
    s, p = fitted.spec, fitted.spec.privacy
    out = publishable(fitted.fit.synthetic, Layout.of(s))
    out.attrs["dprelease"] = {
        "fit_for_publication": False,
        "source": "dprelease.synthesize",
        "mechanism": s.mechanism.name,
        "warning": "exploration only: no ledger charged this draw; do not publish it",
    }
    warnings.warn(
        f"dprelease.synthesize: exploration only ({s.mechanism.name}, epsilon={p.epsilon:g}, not charged to "
        "any ledger); not fit for publication: use dprelease.release to publish",
        NotForPublication,
        stacklevel=2,
    )
    return out


def query(
    release: Release | str | os.PathLike[str], where: Mapping[str, Any], *, level: float = 0.9
) -> QueryResult:
    """How many of the rows the mechanism was fitted on meet ``where``, with an interval at
    ``level``, from the release's published files only (no confidential data, no budget).

    Args:
        release: A :class:`Release`, a bundle folder, or a copy of its ``public/`` folder.
        where: Conditions, ANDed: ``{column: value}`` a category (or one number),
            ``{column: [v1, v2]}`` a set, ``{column: (lo, hi)}`` an inclusive range (numbers,
            or ISO dates on a date column; ``None`` leaves an end open).
        level: The interval's level.

    Returns:
        ``count`` with ``count_lower``/``count_upper``, the same as shares of ``n``, the
        ``method`` (analytic: a sum of measured cells, exact; bracket: a range cuts a measured
        cell; bounds: no measured table holds every column, Fréchet bounds), the ``tables``
        used and the synthetic rows' own estimate.

    Raises:
        QueryError: A column or category the schema does not declare, a range on a
            categorical column, a release that published no tables.
    """
    from dprelease.records.query import run_query

    folder = release.path if isinstance(release, Release) else Path(release)
    return run_query(folder, where, level)
