"""The build backend: setuptools', after checking that the package's layers are folders.

``dprelease/<layer>`` are symbolic links to the top-level folders of the design card
(``flows/``, ``tasks/``, ``mechanisms/`` …). A checkout made without symbolic links (git's
``core.symlinks=false``, Git for Windows' default) writes each link as a small text file
holding its target, and setuptools then builds, without a word, a package with none of
them: ``import dprelease`` works and the first call fails with ``No module named
'dprelease.bundle'`` (issue 41). Here every build (wheel, sdist, editable) refuses first,
naming the layers and what to do.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the hooks this backend passes on unchanged)
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

LAYERS = (
    "bundle",
    "checks",
    "cli",
    "discovery",
    "engines",
    "expectations",
    "flows",
    "ledger",
    "mechanisms",
    "records",
    "spec",
    "tasks",
)
"""The package's layers, each ``dprelease/<layer>`` a link to the top-level folder (in an
sdist, a copy of it)."""


class BrokenCheckout(RuntimeError):
    """A layer of the package is not a folder: the checkout has no symbolic links."""


def check_layers(root: Path) -> None:
    """Raise ``BrokenCheckout`` unless every ``root/dprelease/<layer>`` is a folder with an
    ``__init__.py`` (through its link)."""
    broken = [name for name in LAYERS if not (root / "dprelease" / name / "__init__.py").is_file()]
    if broken:
        raise BrokenCheckout(
            f"dprelease/{{{','.join(broken)}}} are not folders: this checkout has no symbolic links "
            "(git core.symlinks=false, Git for Windows' default), and the package would be built "
            "without them. Clone again with links: `git clone -c core.symlinks=true ...` (on Windows, "
            "with Developer Mode or as administrator), or install from a wheel or an sdist."
        )


def _checked() -> None:
    check_layers(Path.cwd())


Settings = dict[str, str | list[str]] | None


def build_wheel(
    wheel_directory: str, config_settings: Settings = None, metadata_directory: str | None = None
) -> str:
    _checked()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Settings = None) -> str:
    _checked()
    return _setuptools.build_sdist(sdist_directory, config_settings)


def build_editable(
    wheel_directory: str, config_settings: Settings = None, metadata_directory: str | None = None
) -> str:
    _checked()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
