"""The steward's quality verdict after a release, from the advisory checks' exact values
(``internal/utility.json``: computed on the confidential table, for the steward only, never
published)."""

from __future__ import annotations

__all__ = ["quality_line"]


def quality_line(utility: dict) -> tuple[str, str]:
    """One line on how close the synthetic table is to the real one, from the advisory
    checks (``internal/utility.json``: exact values on the confidential table, for the
    steward only, never published), and a verdict: ``good``, ``fair`` or ``poor``.

    The verdict is the worst of: mean 1-way TVD (< 0.05 good, < 0.15 fair) and pMSE as a
    share of its worst value, where a classifier separates the tables perfectly (< 10 %
    good, < 40 % fair). TSTR, when a target is declared, is reported beside them."""
    levels = ("good", "fair", "poor")
    parts, grades = [], []
    tvd = (utility.get("tvd_1way") or {}).get("mean")
    if tvd is not None:
        parts.append(f"mean 1-way TVD {tvd:.3g}")
        grades.append(0 if tvd < 0.05 else 1 if tvd < 0.15 else 2)
    pm = utility.get("pmse") or {}
    if pm.get("pmse") is not None and pm.get("worst"):
        share = pm["pmse"] / pm["worst"]
        parts.append(
            f"pMSE {pm['pmse']:.3g} ({share:.0%} of the {pm['worst']:.3g} at which a classifier "
            "tells every row apart)"
        )
        grades.append(0 if share < 0.1 else 1 if share < 0.4 else 2)
    ts = utility.get("tstr") or {}
    if ts.get("tstr") is not None and ts.get("trtr") is not None:
        parts.append(
            f"{ts['target']} {ts['metric']} {ts['tstr']:.3g} trained on synthetic vs {ts['trtr']:.3g} on real"
        )
    verdict = levels[max(grades)] if grades else "unknown"
    return verdict, "; ".join(parts) or "no utility check could be computed"
