"""Hypothesis settings shared by the property tests: bounded in ``make test``, long on demand.

Every property test takes its settings from :func:`property_settings` and is marked
``property``. In ``make test`` the examples are derandomised (the same every run) and few;
``DPRELEASE_PROPERTY_SCALE=K`` multiplies every test's examples (and a state machine's
steps) by K and draws them at random, printing a reproduction blob on failure::

    DPRELEASE_PROPERTY_SCALE=50 .venv/bin/python -m pytest -m property -p no:cacheprovider

A failure found by a long run is kept as an ``@example`` (or a ``@rule`` sequence in the
machine's docstring) so that ``make test`` replays it ever after.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["SCALE", "property_settings"]

SCALE = max(1.0, float(os.environ.get("DPRELEASE_PROPERTY_SCALE", "1")))


def property_settings(max_examples: int, *, steps: int | None = None) -> settings:
    """``max_examples`` examples (``steps`` steps per example of a state machine) in
    ``make test``; ``SCALE`` times as many, at random, in a long run."""
    long = SCALE > 1
    return settings(
        derandomize=not long,
        database=None,
        max_examples=max(1, round(max_examples * SCALE)),
        stateful_step_count=max(1, round((steps or 50) * (SCALE if long else 1))),
        deadline=None,
        print_blob=long,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )
