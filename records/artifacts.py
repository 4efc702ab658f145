"""The Prefect artifacts of a release: a budget table, a summary, a link to the bundle and
the gates' table. All hold public facts only: the ledger's rows without values, the
totals, the gates' noisy (differentially private) values and decisions, where the bundle is.

The summary also states the dataset's account under its budget policy after this release
(``ledger.budget_facts``, what the release's event carries: a lifetime or this period's
budget, what was spent, what the next release can take) and the ledger's chain head (row and
sha256, as ``dprelease ledger show`` prints it, to anchor the chain elsewhere).

They are built here as plain JSON (``type``, ``key``, ``description``, ``data``, as the
Prefect API stores them), and sent by ``flows.delivery.deliver``: a run that cannot reach the
API queues them with its event instead of failing (``flows/delivery.py``).

Where the bundle is: its absolute path and the host that wrote it, since a ``file://`` link
means something only on that machine; with ``public_url`` (the flow parameter naming the
URL prefix under which each ``<out_dir>/<release_id>/public/`` folder is served to its
readers, e.g. ``https://data.example.org/releases`` or ``s3://bucket/releases``) the link
is ``<public_url>/<release_id>/public/``. Only the ``public/`` folders may be served (or
copied to the bucket), never ``out_dir`` as a whole: ``<release_id>/internal/`` (exact
utility and linkage statistics, the report's real marginals, validation counts),
``failures/`` and ``ledger.db`` live there too, readable by their owner only.
"""

from __future__ import annotations

import json
import math
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dprelease.bundle.release_doc import ReleaseDocument
from dprelease.ledger import Ledger, budget_facts
from dprelease.mechanisms.errors import DPReleaseError
from dprelease.mechanisms.gates import GateResult

__all__ = ["bundle_location", "check_public_url", "release_artifacts"]

_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s@?#]+")


def check_public_url(url: str | None) -> str | None:
    """``url`` without a trailing ``/``, after checking it is a URL prefix (``scheme://…``)
    with no credentials, query or fragment (Prefect stores flow parameters and the events
    carry it); None stays None. ``<url>/<release_id>/public/`` must serve that release's
    ``public/`` folder, and nothing under ``url`` may serve another part of ``out_dir``."""
    if url is None:
        return None
    if not _URL.fullmatch(url):
        raise DPReleaseError(
            "public_url must be a URL prefix such as https://data.example.org/releases or "
            "s3://bucket/releases, without credentials ('@'), query or fragment, under which "
            "<release_id>/public/ serves each release's public/ folder (and nothing else of out_dir)"
        )
    return url.rstrip("/")


def bundle_location(path: Path, public_url: str | None, *, published: bool) -> dict[str, str]:
    """Where the bundle is, for the artifacts and events: its absolute path, the host that
    wrote it, and (published, with ``public_url``) the URL of its ``public/`` folder,
    ``<public_url>/<release_id>/public/``: the only part of a bundle that is served (a
    gated release has none, so no URL)."""
    where = {"path": str(path.resolve()), "host": socket.gethostname()}
    if public_url is not None and published:
        where["url"] = f"{public_url}/{path.name}/public/"
    return where


def _json_safe(value: Any) -> Any:
    """NaN and infinities as null (the API stores JSON), as Prefect's table artifacts do."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _table(key: str, rows: list[dict], description: str) -> dict[str, Any]:
    return {"type": "table", "key": key, "description": description, "data": json.dumps(_json_safe(rows))}


def _markdown(key: str, text: str, description: str) -> dict[str, Any]:
    return {"type": "markdown", "key": key, "description": description, "data": text}


def _account(ledger: Ledger, dataset: str, release_id: str) -> str:
    """The summary's lines on the dataset's budget policy and the ledger's chain head."""
    facts = budget_facts(ledger, dataset, release_id)
    account, period = facts.get("period") or facts.get("lifetime"), facts.get("period")
    if account is None:
        line = f"- budget policy of dataset `{dataset}`: none (its releases compose without a cap)\n"
    else:
        policy = (
            f"period budget ({period['length']}, period {period['period']})" if period else "lifetime budget"
        )
        line = (
            f"- budget policy of dataset `{dataset}`: {policy} (ε = {account['epsilon']:.6g}, "
            f"δ = {account['delta']:.3g}); spent ε = {account['epsilon_spent']:.6g}; "
            + (
                "used up: no further release fits\n"
                if account["used_up"]
                else f"the next release can take ε ≤ {account['next_epsilon_max']:.6g}\n"
            )
        )
    seq, digest = ledger.head()
    return line + f"- ledger chain head: row {seq}, sha256 `{digest}`\n"


def release_artifacts(
    release_id: str,
    document: ReleaseDocument | Mapping[str, Any],
    where: dict[str, str],
    gates: list[GateResult],
    *,
    published: bool,
    ledger: Ledger | None = None,
    dataset: str | None = None,
) -> list[dict[str, Any]]:
    """The artifacts of a release, as the API stores them: the gates' table (if any), a link
    to the bundle (its public folder, or its internal one when a gate stopped it: a
    ``file://`` URL on ``where['host']`` unless ``where['url']`` names it), the budget table
    and a summary (with ``ledger``: ``dataset``'s account under its budget policy and the
    chain head). ``where``: ``bundle_location``. ``document``: the release's, or the mapping
    the flow built (read as a ``ReleaseDocument``)."""
    doc = ReleaseDocument.from_json(document) if isinstance(document, Mapping) else document
    out: list[dict[str, Any]] = []
    if gates:
        out.append(
            _table(
                f"{release_id}-gates",
                [g.as_dict() for g in gates],
                f"Gates of release {release_id}: differentially private decisions on noisy metrics",
            )
        )
    status = "published" if published else "gated: internal reports only"
    folder = Path(where["path"]) / ("public" if published else "internal")
    link = where.get("url") or folder.as_uri()
    on_host = "" if "url" in where else f" on host {where['host']}"
    out.append(
        _markdown(
            f"{release_id}-bundle",
            f"[release {release_id} ({status}){on_host}]({link})",
            f"Bundle of release {release_id}",
        )
    )
    priv = doc.privacy
    led = priv.ledger
    out.append(
        _table(
            f"{release_id}-budget",
            [
                {
                    "stage": r.stage,
                    "statistic": r.statistic,
                    "mechanism": r.mechanism,
                    "sensitivity": r.sensitivity,
                    "noise_scale": r.noise_scale,
                    "rho": r.rho,
                    "epsilon": r.epsilon,
                }
                for r in led.measurements
            ],
            f"Budget ledger of release {release_id}",
        )
    )
    t = led.totals
    key = priv.unit
    unit = "ρ, zCDP" if key == "rho" else "ε, pure DP"
    rows = "\n".join(
        f"| {s.stage} | {s.weight:g} | {s.spent(key):.6g} | {s.allocated(key):.6g} |" for s in led.stages
    )
    located = f"- bundle: `{where['path']}` on host `{where['host']}`\n"
    if "url" in where:
        located += f"- published at: <{where['url']}>\n"
    if ledger is not None and dataset is not None:
        located += _account(ledger, dataset, release_id)
    out.append(
        _markdown(
            f"{release_id}-summary",
            f"# Release `{release_id}`\n\n"
            f"- status: {status}\n"
            f"- mechanism: `{doc.mechanism.name}`\n"
            f"- privacy: ({t.epsilon:.6g}, {t.delta:.3g})-DP, "
            f"{priv.accountant} accounting, replace-one neighbours\n"
            f"- synthetic rows: {priv.synthetic_rows}\n"
            f"{located}\n"
            f"| stage | weight | spent ({unit}) | allocated ({unit}) |\n|---|---|---|---|\n{rows}\n",
            f"Summary of release {release_id}",
        )
    )
    return out
