"""The release spec: what a steward declares (dataset, public schema, privacy budget,
mechanism, checks, engine, outputs), validated with pydantic; every error names its field.

Nothing here reads data. It sits between the mathematics (``mechanisms``) and everything
that runs a release, so every layer above can import it and it imports none of them.
"""

from dprelease.spec.forecast import Forecast, forecast
from dprelease.spec.release import (
    RELEASE_ID,
    ContinuousSpec,
    EngineSpec,
    ReleaseSpec,
    SpecError,
    load_spec,
    spec_from_mapping,
)

__all__ = [
    "RELEASE_ID",
    "ContinuousSpec",
    "EngineSpec",
    "Forecast",
    "ReleaseSpec",
    "SpecError",
    "forecast",
    "load_spec",
    "spec_from_mapping",
]
