"""The release flow and its Prefect plumbing; ``demo/`` holds the embedded demo spec and data."""

from pathlib import Path

DEMO_SPEC: Path = Path(__file__).parent / "demo" / "adult.yaml"
"""The embedded demo spec (UCI Adult, factor_gauss, ε = 1): ``dprelease demo``, ``Spec.demo()``."""
