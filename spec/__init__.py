"""The release spec: what a steward declares (dataset, public schema, privacy budget,
mechanism, checks, engine, outputs), validated with pydantic; every error names its field.

Nothing here reads data. It sits between the mathematics (``mechanisms``) and everything
that runs a release, so every layer above can import it and it imports none of them.
"""

from dprelease.spec.forecast import Forecast, forecast
from dprelease.spec.loading import load_spec, read_spec_mapping, spec_from_mapping
from dprelease.spec.release import (
    RELEASE_ID,
    ContinuousSpec,
    EngineSpec,
    ReleaseSpec,
    SpecError,
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
    "read_spec_mapping",
    "spec_from_mapping",
]
