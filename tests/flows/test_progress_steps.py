"""Every step the release flow reports (``Run.at``, ``step_reached``) is one the progress
display knows: a step added without its line once crashed a release after its budget was
spent (the display's KeyError). Read from the source, so a new step cannot be missed."""

import ast
from pathlib import Path

from dprelease.flows.progress import STAGES

FLOWS = Path(__file__).resolve().parents[2] / "flows"


def _reported_steps() -> set[str]:
    found = set()
    for path in FLOWS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("at", "step_reached")
                and node.args
                and isinstance(node.args[-1], ast.Constant)
                and isinstance(node.args[-1].value, str)
            ):
                found.add(node.args[-1].value)
    return found


def test_every_reported_step_has_a_line_in_the_display():
    steps = _reported_steps()
    assert "build_replicates" in steps and "allocate_budget" in steps  # the scan sees the flow's steps
    assert steps <= set(STAGES), sorted(steps - set(STAGES))
