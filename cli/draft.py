"""``dprelease init`` and ``dprelease discover``: a draft release spec for a data file.

``init`` reads the header (and a Parquet file's declared types) and nothing else: no value,
no ledger, no budget. ``discover`` also finds the bounds, atoms and categories of the
columns whose kind is known under DP (``discovery.schema``), spending privacy budget: a
release of its own in the dataset's ledger, with a bundle ``audit verify`` checks. The two
are separate commands so that a read-free command never turns into one that spends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dprelease.cli.console import console, exit_code, fail, shown
from dprelease.mechanisms.errors import DPReleaseError

if TYPE_CHECKING:
    from dprelease.discovery.schema import Discovery

__all__ = ["discover", "init"]

DRAFT_KINDS = ("continuous", "integer", "date", "datetime", "nominal")

DataArg = Annotated[
    Path, typer.Argument(help="The data file (CSV, .csv.gz or Parquet) to write a draft spec for.")
]
DraftOutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Where to write the draft (default: <data name>.yaml beside the data)."),
]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="dataset.name in the draft (default: the file's stem).")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite an existing file at --out.")]
KindOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--kind",
        help="NAME=KIND, repeatable: a column's kind from public knowledge (continuous, integer, date, "
        "datetime, nominal); overrides a Parquet type. A CSV's kinds are never guessed from its values.",
    ),
]
LifetimeDeltaOpt = Annotated[
    float | None, typer.Option("--lifetime-delta", help="The dataset's lifetime delta (default: 1e-6).")
]

MOVED = (
    "--private-epsilon",
    "--private-delta",
    "--atom-share",
    "--bundle-out",
    "--ledger",
    "--insecure-seed",
)
"""``init``'s options of the DP discovery, which is now ``dprelease discover``: refused by ``init``
(exit 2) so that no script that passed them gets a read-free draft in silence."""


def _moved(option: str) -> Any:
    return typer.Option(option, hidden=True)


def _parse_kinds(given: list[str], columns: list[str]) -> dict[str, tuple[str, str]]:
    out = {}
    for item in given:
        name, _, kind = item.partition("=")
        if name not in columns or kind not in DRAFT_KINDS:
            fail(
                f"--kind {item!r}: expected NAME=KIND with NAME a column of the file and KIND one of "
                f"{', '.join(DRAFT_KINDS)}.",
                "declare each column's kind from public knowledge (the codebook), e.g. --kind age=integer.",
                2,
            )
        out[name] = (kind, "--kind")
    return out


def _header(data: Path, kind: list[str] | None) -> tuple[list[str], dict[str, tuple[str, str]] | None]:
    """The file's column names, and the kinds public facts give (a Parquet type, ``--kind``)."""
    from dprelease.engines.header import declared_kinds, read_header

    try:
        columns = read_header(data)
        kinds = declared_kinds(data)
    except DPReleaseError as e:
        fail(str(e), "pass the path of a readable CSV or Parquet file.", exit_code(e))
    if kind:
        kinds = {**(kinds or {}), **_parse_kinds(kind, columns)}
    return columns, kinds


def _target(data: Path, out: Path | None, force: bool) -> Path:
    target = out or data.with_name(f"{data.name.split('.')[0]}.yaml")
    if target.exists() and not force:
        fail(f"'{target}' already exists.", "choose another --out or pass --force to overwrite it.", 2)
    return target


def _lifetime(epsilon: float | None, delta: float | None) -> tuple[float, float] | None:
    return None if epsilon is None else (epsilon, delta or 1e-6)


def _write_draft(
    target: Path,
    data: Path,
    stem: str,
    columns: list[str],
    kinds: dict[str, tuple[str, str]] | None,
    lifetime: tuple[float, float] | None,
    found: Discovery | None = None,
    entries: dict[str, tuple[str, str, str]] | None = None,
) -> None:
    """Write the draft (data path relative to it) and say what is left to do."""
    from dprelease.spec.draft import draft_text

    try:
        rel = os.path.relpath(data.resolve(), target.resolve().parent)
    except ValueError:  # another drive (Windows): an absolute path
        rel = str(data.resolve())
    text = draft_text(stem, rel, columns, kinds, entries, found.release_id if found else None, lifetime)
    target.write_text(text, encoding="utf-8")
    unknown = len(columns) - len(kinds or {})
    filled = (
        f"{len(entries)} column(s) discovered under DP ({found.release_id}), " if found and entries else ""
    )
    console.print(
        f"wrote {shown(str(target))}: {len(columns)} column(s), "
        + (f"{unknown} of unknown kind, " if unknown else "")
        + (filled or "every bound and category FILL. ")
        + "Next: fill what is FILL from public knowledge, confirm draft.confirm, then "
        f"`dprelease validate {shown(str(target))}`.",
        soft_wrap=True,
    )


def init(
    data: DataArg,
    out: DraftOutOpt = None,
    name: NameOpt = None,
    force: ForceOpt = False,
    kind: KindOpt = None,
    lifetime_epsilon: Annotated[
        float | None,
        typer.Option(
            "--lifetime-epsilon",
            help="The dataset's lifetime epsilon, written into the draft as privacy.lifetime_epsilon.",
        ),
    ] = None,
    lifetime_delta: LifetimeDeltaOpt = None,
    private_epsilon: Annotated[str | None, _moved("--private-epsilon")] = None,
    private_delta: Annotated[str | None, _moved("--private-delta")] = None,
    atom_share: Annotated[str | None, _moved("--atom-share")] = None,
    bundle_out: Annotated[str | None, _moved("--bundle-out")] = None,
    ledger: Annotated[str | None, _moved("--ledger")] = None,
    insecure_seed: Annotated[str | None, _moved("--insecure-seed")] = None,
) -> None:
    """Write a draft release spec from the data file's header (and a Parquet file's declared
    column types, or --kind), without reading a value or spending any budget: every bound,
    category and level is FILL, to be supplied from public knowledge; every guess is listed
    under draft.confirm. To discover bounds and categories under DP instead, spending budget,
    use `dprelease discover`."""
    given = (private_epsilon, private_delta, atom_share, bundle_out, ledger, insecure_seed)
    moved = [option for option, value in zip(MOVED, given, strict=True) if value is not None]
    if moved:
        fail(
            f"{moved[0]} is not an option of init: init reads no value of the data and spends no budget; "
            "the discovery under DP is the command `dprelease discover`.",
            "run `dprelease discover DATA --epsilon E` with the same options to discover bounds, atoms "
            "and categories under DP (charged to the dataset's ledger); or drop the discovery options for "
            "a draft with every value FILL. Nothing was read or written.",
            2,
        )
    columns, kinds = _header(data, kind)
    target = _target(data, out, force)
    stem = name or data.name.split(".")[0]
    _write_draft(target, data, stem, columns, kinds, _lifetime(lifetime_epsilon, lifetime_delta))


def discover(
    data: DataArg,
    epsilon: Annotated[
        float,
        typer.Option(
            "--epsilon",
            "--private-epsilon",
            help="The epsilon this discovery spends of the dataset's budget: split evenly over the columns "
            "whose kind is known (--kind or a Parquet type).",
        ),
    ],
    delta: Annotated[
        float,
        typer.Option(
            "--delta",
            "--private-delta",
            help="The delta of the partition selections of categories and atoms (a category or value held "
            "by one record is published with probability delta/2); split over the columns that run one "
            "(nominal ones; numeric ones with --atom-share), and 0 only when none does. Keep it a small "
            "part of the dataset's lifetime delta: later zCDP releases convert at what is left of it.",
        ),
    ] = 1e-7,
    atom_share: Annotated[
        float,
        typer.Option(
            "--atom-share",
            help="Also discover atoms: the exact values of a continuous/integer column that hold at least "
            "this share of the rows (between 0 and 1, e.g. 0.05), each a cell of its own (0 for a "
            "zero-inflated amount). They take a third of each numeric column's share, so its bounds need "
            "about 1.5x the epsilon for the same accuracy. Default 0: no atoms, the bounds take the whole "
            "share.",
        ),
    ] = 0.0,
    kind: KindOpt = None,
    out: DraftOutOpt = None,
    name: NameOpt = None,
    force: ForceOpt = False,
    bundle_out: Annotated[
        Path,
        typer.Option(
            "--bundle-out",
            help="The folder that receives <release_id>/public of the discovery (and, by default, the "
            "ledger OUT/ledger.db, as `dprelease release --out`).",
        ),
    ] = Path("releases"),
    ledger: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            envvar="DPRELEASE_LEDGER",
            help="The budget ledger: a database URL, a SQLite ledger file or a folder holding ledger.db "
            "(also read from DPRELEASE_LEDGER); default BUNDLE_OUT/ledger.db. The password, if any, in "
            "DPRELEASE_LEDGER_PASSWORD.",
        ),
    ] = None,
    lifetime_epsilon: Annotated[
        float | None,
        typer.Option(
            "--lifetime-epsilon",
            help="The dataset's lifetime epsilon: declared to the ledger (fixed there when first declared) "
            "and written into the draft as privacy.lifetime_epsilon.",
        ),
    ] = None,
    lifetime_delta: LifetimeDeltaOpt = None,
    insecure_seed: Annotated[
        int | None,
        typer.Option(
            "--insecure-seed",
            help="Fix the noise seed (numpy's samplers instead of OpenDP's vetted ones), for tests only: "
            "the discovery's bundle then says it is NOT fit for publication.",
        ),
    ] = None,
) -> None:
    """Discover a draft spec's bounds (private quantiles) and atoms of continuous/integer
    columns and the categories of nominal ones (partition selection) under DP, spending
    --epsilon of the dataset's budget: a release of its own in the ledger (stage 'schema')
    with a bundle `dprelease audit verify` checks. Only columns whose kind is known from
    public facts (--kind, a Parquet type) are read; the others are FILL, as `dprelease init`
    writes them."""
    columns, kinds = _header(data, kind)
    target = _target(data, out, force)
    stem = name or data.name.split(".")[0]
    lifetime = _lifetime(lifetime_epsilon, lifetime_delta)
    found, entries = _discover(
        data, stem, kinds, epsilon, delta, bundle_out, ledger, lifetime, insecure_seed, atom_share
    )
    _write_draft(target, data, stem, columns, kinds, lifetime, found, entries)


def _discover(
    data: Path,
    dataset: str,
    kinds: dict[str, tuple[str, str]] | None,
    epsilon: float,
    delta: float,
    out: Path,
    ledger: str | None,
    lifetime: tuple[float, float] | None,
    seed: int | None,
    atom_share: float,
) -> tuple[Discovery, dict[str, tuple[str, str, str]]]:
    """The DP discovery (``discovery.schema``) and its draft lines; a refusal writes no draft."""
    from dprelease.discovery.schema import DISCOVERABLE, draft_entries
    from dprelease.discovery.schema import discover as discover_schema
    from dprelease.ledger import BudgetRefused, ledger_url

    chosen = {c: k for c, (k, _) in (kinds or {}).items() if k in DISCOVERABLE}
    if not chosen:
        fail(
            "discover: no column has a known continuous, integer or nominal kind, so there is "
            "nothing to discover (a CSV's kinds are never guessed from its values).",
            "declare kinds with --kind NAME=KIND (e.g. --kind age=integer --kind sex=nominal).",
            2,
        )
    try:
        found = discover_schema(
            data,
            chosen,
            dataset=dataset,
            epsilon=epsilon,
            delta=delta,
            ledger_url=ledger_url(ledger, out),
            out=out,
            lifetime=lifetime,
            seed=seed,
            atom_share=atom_share,
        )
    except BudgetRefused as e:
        fail(
            str(e),
            "see `dprelease ledger show` for what this dataset has spent; no draft was written.",
            exit_code(e),
        )
    except (DPReleaseError, ValueError) as e:
        fail(str(e), "fix the option or the data file named above; no draft was written.", 2)
    console.print(
        f"discovered under DP: {len(found.bounds)} column(s)' bounds{' and atoms' if found.atoms else ''} "
        f"and {len(found.categories)} column(s)' categories for epsilon={epsilon:g}, delta={found.delta:g}, "
        f"charged to dataset '{shown(dataset)}' as release {found.release_id}; its bundle is "
        f"{shown(str(found.bundle))} "
        f"(`dprelease audit verify {shown(str(found.bundle))}`).",
        soft_wrap=True,
    )
    return found, draft_entries(found, chosen)
