"""The section of item 6: the DPFM reproduction (simulations I/II and Adult): the tables against
the paper's DPFM₁ rows, a reading of them, Adult's F1 by class, and what differs from the paper."""

from __future__ import annotations

import math
from typing import Any

from common import run_command
from dpfm_data import N_SIM, SIM_BOUND


def _cell(s: dict[str, Any] | None, digits: int = 3) -> str:
    """'mean ± sd' (sd omitted with one rep; '–' when undefined everywhere)."""
    if s is None or not s["n"]:
        return "–"
    out = f"{s['mean']:.{digits}f}"
    if s["n"] > 1 and math.isfinite(s["sd"]):
        out += f" ± {s['sd']:.{digits}f}"
    return out + (f" ({s['undefined']} undef.)" if s.get("undefined") else "")


def _triple(t: Any) -> str:
    return "/".join(f"{v:.3f}" for v in t) if t else ""


def _eps_text(eps: Any) -> str:
    return "∞" if eps == "inf" else ("" if eps is None else f"{eps:g}")


def _paper_cells(paper: dict[str, Any], c: dict[str, Any]) -> tuple[str, str]:
    """The paper's DPFM₁ (test, valid) triples beside our row, where the paper tabulates one."""
    if c["variant"] is None:
        return _triple(paper["original"]), _triple(paper["original"])
    if c["epsilon"] == "inf":
        return "", ""
    row = paper.get(str(float(c["epsilon"])))
    return (_triple(row["test"]), _triple(row["valid"])) if row else ("", "")


def _table(d: dict[str, Any], paper: dict[str, Any]) -> list[str]:
    lines = [
        "| method | ε | test acc | test AUC | test F1 | valid acc | valid AUC | valid F1 | "
        "paper test acc/AUC/F1 | paper valid acc/AUC/F1 | overlap | label agree | syn. pos. rate | time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for c in d["configs"].values():
        pt, pv = _paper_cells(paper, c)
        cells = [_cell(c.get(f"{part}_{m}")) for part in ("test", "valid") for m in ("acc", "auc", "f1")]
        lines.append(
            f"| {c['label']} | {_eps_text(c['epsilon'])} | {' | '.join(cells)} | {pt} | {pv} | "
            f"{_cell(c.get('overlap'), 2)} | {_cell(c.get('label_agreement'), 2)} | "
            f"{_cell(c.get('synthetic_positive_rate'), 2)} | {c['wall_s']:.0f} s |"
        )
    return lines


def _finite(d: dict[str, Any], variant: str, metric: str) -> list[float]:
    """Means of ``metric`` over the finite-ε rows of one variant."""
    return [
        c[metric]["mean"]
        for c in d["configs"].values()
        if c["variant"] == variant and c["epsilon"] not in (None, "inf") and metric in c
    ]


def _span(values: list[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}" if values else "–"


def _valid_triple(c: dict[str, Any]) -> str:
    return "/".join(f"{c[f'valid_{m}']['mean']:.3f}" for m in ("acc", "auc", "f1"))


def _reading_line(key: str, d: dict[str, Any], pap: dict[str, Any]) -> str:
    """Finite-ε validating AUC and overlap of both variants, the no-noise rows and the paper."""
    c = d["configs"]
    r_over_p = {v: c[f"{v}_1"]["r"]["mean"] / c[f"{v}_1"]["p_star"]["mean"] for v in ("corrected", "paper")}
    overlap = {v: _span(_finite(d, v, "overlap")) for v in ("corrected", "paper")}
    return (
        f"- {d['title']}: valid AUC over the ε grid {_span(_finite(d, 'corrected', 'valid_auc'))} "
        f"(corrected) and {_span(_finite(d, 'paper', 'valid_auc'))} (paper variant); valid accuracy "
        f"{_span(_finite(d, 'corrected', 'valid_acc'))} against a majority rate of "
        f"{max(d['positive_rate']['mean'], 1 - d['positive_rate']['mean']):.2f}; overlap "
        f"{overlap['corrected']} (r/p* = {r_over_p['corrected']:.3f}) and {overlap['paper']} "
        f"(r/p* = {r_over_p['paper']:.3f}). No noise (ε = ∞), valid acc/AUC/F1: paper variant "
        f"{_valid_triple(c['paper_inf'])}, corrected {_valid_triple(c['inf'])}; the paper's DPFM "
        f"{_triple(pap['0.1']['valid'])} (ε = 0.1) and {_triple(pap['5.0']['valid'])} (ε = 5); "
        f"Original ours {_valid_triple(c['original'])}, the paper's {_triple(pap['original'])}; the "
        f"paper's four competitors {pap['competitors_valid']} (valid acc / AUC)."
        + (" F1: ours of `>50K`, the paper's of `<=50K` (table below)." if key == "adult" else "")
    )


def _reading(figures: dict[str, Any]) -> list[str]:
    """One line per data set: what the tables say, with the figures that say it."""
    lines = ["Reading (chance AUC = 0.5; overlap ≈ r/p* means a random subspace):", ""]
    for key, d in figures["datasets"].items():
        lines.append(_reading_line(key, d, figures["paper"][key]))
    return [*lines, ""]


def _adult_f1(d: dict[str, Any], paper: dict[str, Any]) -> list[str]:
    """Adult: F1 of >50K (our 'F1') beside F1 of <=50K, the class the paper's F1 matches."""
    lines = [
        "Adult F1 by class on validating data (the paper's Original F1 0.878 at accuracy 0.812 and "
        "a 76 % majority can only be the F1 of `<=50K`):",
        "",
        "| method | ε | F1 `>50K` | F1 `<=50K` | paper F1 |",
        "|---|---:|---:|---:|---:|",
    ]
    for c in d["configs"].values():
        _, pv = _paper_cells(paper, c)
        lines.append(
            f"| {c['label']} | {_eps_text(c['epsilon'])} | {_cell(c['valid_f1'])} | "
            f"{_cell(c['valid_f1_neg'])} | "
            f"{pv.split('/')[-1] if pv else ''} |"
        )
    return [*lines, ""]


def _dims(d: dict[str, Any]) -> str:
    """'Title p* = …, r = … (corrected) / … (paper)' from the diagnostics of the ε = 1 rows."""
    c = d["configs"]
    r_c, r_p = _cell(c["corrected_1"].get("r"), 1), _cell(c["paper_1"].get("r"), 1)
    return f"{d['title']} p* = {_cell(c['inf'].get('p_star'), 0)}, r = {r_c} (corrected) / {r_p} (paper)"


def _setup(figures: dict[str, Any]) -> list[str]:
    cmd = run_command("dpfm", figures["quick"])
    reps, a = figures["reps"], figures["adult"]
    seeds = figures["seeds"]
    per = ", ".join(f"{d['title']} {d['wall_s']:.0f} s" for d in figures["datasets"].values())
    mech = figures.get("mechanism", {})
    lines = [
        f"- Command: `{cmd}` ({'quick mode' if figures['quick'] else 'full mode'}); "
        f"run time {figures['total_s']:.0f} s ({per}).",
        f"- Reps: {reps['sim']} per simulation setting, {reps['adult']} for Adult (the paper: 100). "
        f"Seeds: data `{seeds['data']}`, mechanism `{seeds['mechanism']}` (m = method index in "
        f"table order, from 0 = Original), 80/20 split `{seeds['split']}`, classifiers "
        f"`{seeds['classifiers']}`; d = " + ", ".join(f"{k} {v}" for k, v in seeds["d"].items()) + ".",
        f"- ε grid {', '.join(f'{e:g}' for e in figures['epsilons'])}; budget split DPFM₁ "
        f"(ε1, ε2, ε3) = (⅓, ⅓, ⅓) ε; pure ε-DP (corrected variant).",
    ]
    if mech:
        lines.append(f"- Mechanism: {mech['text']}")
    lines.append(
        f"- Data: n = {N_SIM} per simulated replicate (p = 22 / 80 columns + label); Adult: the "
        f"{a['rows_csv']:,}-row `flows/demo/adult.csv`, {a['rows_dropped']:,} rows with `?` dropped → "
        f"{a['rows_clean']:,} (the paper: 33,916 of 48,842, unexplained), then {a['subsample']:,} rows "
        "subsampled per rep (keeps SVC affordable)."
    )
    dims = ", ".join(_dims(d) for d in figures["datasets"].values())
    lines.append(f"- Encoded width and factors: {dims}.")
    lines.append(
        "- Columns: test = synthetic test rows with synthetic labels; valid = the original rows at "
        "the synthetic test indices; each cell mean ± SD over reps of the mean over SVM (RBF SVC, "
        "AUC from `decision_function`), RF (100 trees) and KNN (k = 5). F1 = F1 of class 1 "
        "(simulations: y = 1, about 85 % of rows; Adult: `>50K`). overlap = ‖ṼᵀV‖²_F / r between "
        "the released and the exact loadings (1 = same subspace, ≈ r/p* = random). label agree = "
        "share of rows whose synthetic label equals the real one; syn. pos. rate = share of synthetic "
        "labels equal to 1. time = wall seconds over all reps "
        "(synthesis + 3 classifiers)."
    )
    return [*lines, ""]


def _differences(figures: dict[str, Any]) -> list[str]:
    mech = figures.get("mechanism", {})
    bullets = [
        "- **The numbers.** At every finite ε both our variants sit near chance on validating data: the "
        "overlap column shows the released loadings span a random subspace (≈ r/p*), the synthetic labels "
        "are about half positive and agree with the real ones about as often as independent draws would, "
        "so valid accuracy falls to ≈ 0.5, below the majority rate the paper's competitors reach. AUC "
        "means scatter around 0.5 with large SDs: each rep's synthetic label is a random direction in "
        "feature space, whose sign against the real label is random. The paper's DPFM column is flat from "
        "ε = 0.1 to 5 and close to Original, like our no-noise rows: the paper variant at ε = ∞ (r by "
        "eq. (3)) comes within about 0.04 of the paper's DPFM validating accuracy and AUC (see the reading). "
        "With Laplace noise "
        "of scale 2√p*·r/ε1 per loading entry against entries of size ~1/√p*, and 2√r/ε2 (paper: 2r/ε2) per "
        "score against scores of norm ≤ 1, the paper's numbers are very likely unreachable with the "
        "algorithm as written (digest §5.1); we report ours and treat matching Tables 3–5 as a non-goal.",
        "- **Synthetic test scores are not utility.** The output X̃* = W̃Ṽᵀ has rank r: every synthetic "
        "column, the label's latent coordinate included, is a linear function of the same r noisy scores. "
        "With r = 2 (corrected) the classifiers recover the synthetic label from the other synthetic "
        "columns almost perfectly (test columns near 1) even where it no longer tracks the real label "
        "(valid columns, label agree).",
        "- Corrected variant (DP) vs the paper's algorithm: r public "
        f"(r = {mech.get('corrected', {}).get('factors', '?')}, the module default; the paper picks r by "
        "eq. (3), see the r line above), ω_i = 1/r; continuous columns on their public scale √12(u − ½); "
        "coordinates clipped to ±κ and rows divided by κ√p* so ‖x*ᵢ‖₂ ≤ 1; the ordinal thresholds released "
        "first (i.i.d. Laplace, one joint ε3, isotonic post-processing) and used for encoding too; score "
        "sensitivity 2√r instead of 2r; ordinal levels decoded by rank to match f̃.",
        "- Paper variant (NOT DP): the algorithm as printed (data mean/SD normalisation, raw-frequency "
        "encoding thresholds, sorted-noise Alg. 2 with ε3 per ordinal column, unbounded rows with Δ = 2r, "
        "r by eq. (3)). It shows that the literal algorithm does not reach the paper's numbers either.",
        "- ε = ∞ (both variants without any noise) is our ablation; the paper has none.",
        f"- ε grid: {len(figures['epsilons'])} values, not the paper's 11; only DPFM₁ (⅓, ⅓, ⅓) "
        "(the paper reports DPFM₂–₄ within ±.006 of it); the paper tabulates ε = 0.1 and 5 only, so "
        "the other rows have no paper figure.",
        f"- Reps: {figures['reps']['sim']} (simulations) and {figures['reps']['adult']} (Adult), not 100.",
        "- Competitors (PCAPPD, DPRP, PrivBayes, PrivPGM) are not run; their range from the paper is in the "
        "reading above.",
        "- Classifier settings: sklearn defaults (the paper gives none), RF 100 trees, KNN k = 5; "
        "features: continuous columns standardized with the original data's mean/SD, ordinal columns as "
        'level indices, nominal columns one-hot. The paper\'s "AUC" is described as precision-recall '
        "AUC, but its null methods score ≈ 0.5 (as low as 0.43), which only ROC-AUC does: we report ROC-AUC.",
        "- A synthetic training set with one label class gives a constant predictor (that class, AUC 0.5); "
        'a test set with one class leaves AUC undefined (counted as "undef." and left out of the mean); '
        "F1 with no predicted and no true positives is 0.",
        "- Split: a random 80/20 split of the row indices per rep, the same indices for the synthetic and "
        "the real rows (DPFM keeps row order), so valid = the real rows at the synthetic test indices.",
        f"- Simulations: X1 ~ N(0, Σ) clipped to the declared public bounds [−{SIM_BOUND:g}, {SIM_BOUND:g}] "
        "(and y drawn from the clipped values); discrete columns uniform and independent (the paper says "
        '"randomly").',
        "- Adult: the UCI training file only (32,561 rows, not 48,842), all rows with `?` dropped; "
        f"workclass groups {_workclass_text(figures['adult']['workclass'])}; marital = Couple for "
        f"{' / '.join(figures['adult']['married'])}, else Single; native-country US vs not; "
        f"{figures['adult']['subsample']:,}-row subsample per rep, not the full data.",
        "- Adult F1: the paper's F1 (0.878 at accuracy 0.812) matches the F1 of the majority class "
        "`<=50K`, not of `>50K`; the Adult F1 table above shows both.",
    ]
    if mech.get("differences"):
        bullets += [f"- {t}" for t in mech["differences"]]
    return ["What differs from the paper:", "", *bullets, ""]


def _workclass_text(mapping: dict[str, str]) -> str:
    groups: dict[str, list[str]] = {}
    for raw, g in mapping.items():
        groups.setdefault(g, []).append(raw)
    return "; ".join(f"{g} = {', '.join(v)}" for g, v in groups.items())


def render(figures: dict[str, Any]) -> list[str]:
    """Markdown lines of the BENCHMARKS.md section (without its '## title' line)."""
    lines = _setup(figures)
    for key, d in figures["datasets"].items():
        pos = d["positive_rate"]["mean"]
        head = f"**{d['title']}** (n = {d['n']:,}, {d['reps']} reps, real positive rate {pos:.2f})"
        lines += [head, "", *_table(d, figures["paper"][key]), ""]
    lines += _reading(figures)
    if "adult" in figures["datasets"]:
        lines += _adult_f1(figures["datasets"]["adult"], figures["paper"]["adult"])
    return lines + _differences(figures)
