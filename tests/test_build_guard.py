"""The build backend's guard (``backend/dprelease_backend.py``): its layers are the
package's links, a checkout with them passes, and one whose links git wrote as text files
(core.symlinks=false) is refused naming them (the install tier builds with pip:
``tests/install/test_wheel.py``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("dprelease_backend", REPO / "backend" / "dprelease_backend.py")
assert _spec is not None and _spec.loader is not None
backend = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(backend)


def test_the_guarded_layers_are_the_packages_links():
    links = {p.name for p in (REPO / "dprelease").iterdir() if p.is_symlink()}
    assert set(backend.LAYERS) == links


def test_a_checkout_with_links_passes_and_one_without_is_refused(tmp_path):
    backend.check_layers(REPO)
    package = tmp_path / "dprelease"
    package.mkdir()
    for name in backend.LAYERS:
        (package / name).write_text(os.readlink(REPO / "dprelease" / name))
    shutil.copy(REPO / "dprelease" / "__init__.py", package / "__init__.py")
    with pytest.raises(backend.BrokenCheckout, match=r"dprelease/\{bundle,checks,.*,tasks\} are not folders"):
        backend.check_layers(tmp_path)
