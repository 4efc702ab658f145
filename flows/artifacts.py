"""The Prefect artifacts of a release: a budget table, a summary, a link to the bundle and
the gates' table. All hold public facts only: the ledger's rows without values, the
totals, the gates' noisy (differentially private) values and decisions."""

from __future__ import annotations

from pathlib import Path

from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from mechanisms.gates import GateResult

__all__ = ["release_artifacts"]


def release_artifacts(
    release_id: str, document: dict, path: Path, gates: list[GateResult], *, published: bool
) -> None:
    """Prefect artifacts: a budget table, a summary and a link to the bundle (its public
    folder, or its internal one when a gate stopped it) and the gates' table (if any)."""
    if gates:
        create_table_artifact(
            key=f"{release_id}-gates",
            table=[g.as_dict() for g in gates],
            description=f"Gates of release {release_id}: differentially private decisions on noisy metrics",
        )
    create_link_artifact(
        key=f"{release_id}-bundle",
        link=(path / ("public" if published else "internal")).resolve().as_uri(),
        link_text=f"release {release_id} ({'published' if published else 'gated: internal reports only'})",
        description=f"Bundle of release {release_id}",
    )
    led = document["privacy"]["ledger"]
    create_table_artifact(
        key=f"{release_id}-budget",
        table=[
            {
                k: r[k]
                for k in ("stage", "statistic", "mechanism", "sensitivity", "noise_scale", "rho", "epsilon")
            }
            for r in led["measurements"]
        ],
        description=f"Budget ledger of release {release_id}",
    )
    t = led["totals"]
    rows = "\n".join(
        f"| {s['stage']} | {s['weight']:g} | {s.get('rho_spent', s.get('epsilon_spent')):.6g} |"
        for s in led["stages"]
    )
    create_markdown_artifact(
        key=f"{release_id}-summary",
        markdown=(
            f"# Release `{release_id}`\n\n"
            f"- mechanism: `{document['mechanism']['name']}`\n"
            f"- privacy: ({t['epsilon']:.6g}, {t['delta']:.3g})-DP, "
            f"{document['privacy']['accountant']} accounting, replace-one neighbours\n"
            f"- synthetic rows: {document['privacy']['synthetic_rows']}\n"
            f"- bundle: `{path}`\n\n| stage | weight | spent |\n|---|---|---|\n{rows}\n"
        ),
        description=f"Summary of release {release_id}",
    )
