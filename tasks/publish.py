"""``write_bundle``: the release document, the manifests, the ledger's seal and the atomic
publish of ``<out>/<release_id>/`` (``bundle.write``).

Policy: ``cache_policy=NO_CACHE, persist_result=False`` (it receives the synthetic table
before publication and writes our own files; Prefect keeps nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from dprelease.bundle.write import write_bundle_files
from dprelease.tasks.scrub import scrub_errors

__all__ = ["write_bundle"]


@task(name="write_bundle", cache_policy=NO_CACHE, persist_result=False)
@scrub_errors
def write_bundle(
    staging: Path,
    dest: Path,
    synthetic: pd.DataFrame | None,
    document: dict,
    *,
    publish: bool = True,
    seal: Callable[[str | None, str], None] | None = None,
) -> Path:
    """``bundle.write.write_bundle_files``: ``public/`` (unless a gate stopped the release),
    the manifests, ``seal`` with their sha256, then the rename into place."""
    path = write_bundle_files(staging, dest, synthetic, document, publish=publish, seal=seal)
    get_run_logger().info(
        "%s %s", "published release bundle" if publish else "kept internal reports in", dest
    )
    return path
