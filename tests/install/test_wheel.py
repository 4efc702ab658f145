"""The package as a user gets it (issue 31): the wheel built in isolation (``python -m build``)
from the repository's files alone, installed non-editable into a fresh virtual environment,
and run from a folder that is not the repository and holds the user's own ``flows/`` and
``tasks/`` packages (conventional names in Prefect projects), which must not be shadowed.

One fixture builds and installs once for the module; each step's wall time is printed
(``pytest -s``). The files copied are git's list (tracked, plus new files not ignored), so a
stale ``build/`` or ``*.egg-info`` of the working tree cannot reach the wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.install, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 900  # seconds per subprocess: a cold pip cache downloads every dependency


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path  # the fresh venv's interpreter
    home: Path  # the user's folder (not the repository), with decoy packages
    env: dict[str, str]


def _run(cmd: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``cmd``; on a non-zero exit fail with its output (stdout and stderr)."""
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, f"{cmd} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _timed(label: str, cmd: list[str | Path], **kwargs) -> str:
    start = time.perf_counter()
    out = _run(cmd, **kwargs)
    print(f"[install] {label}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return out


def _copy_repository(dest: Path) -> Path:
    """The files git lists (tracked, and new ones not ignored; deleted ones skipped), copied
    with their symlinks kept as symlinks (``dprelease/flows -> ../flows``)."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO)
    for name in filter(None, listed.split("\0")):
        src, dst = REPO / name, dest / name
        if not (src.is_symlink() or src.is_file()):
            continue  # deleted in the working tree, not yet in the index
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest


def _user_folder(home: Path) -> Path:
    """A user's project folder: a package named like each of ours (``flows``, ``tasks``, ...)
    that refuses to be imported, so any bare import of those names fails loudly."""
    names = [p.name for p in (REPO / "dprelease").iterdir() if p.is_symlink()]
    assert {"flows", "tasks"} <= set(names), names
    for name in names:
        (home / name).mkdir(parents=True)
        (home / name / "__init__.py").write_text(
            f'raise ImportError("the user\'s own {name}/ was imported")\n'
        )
    return home


def _user_env(tmp: Path, venv: Path) -> dict[str, str]:
    """The user's environment: the fresh venv first on PATH, its own Prefect home (a temporary
    server per process), nothing that points back at the repository or the test session."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PREFECT_API_URL", "PREFECT_HOME"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PREFECT_HOME"] = str(tmp / "prefect-home")
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    env.setdefault("GX_ANALYTICS_ENABLED", "false")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Build, create the venv, install; the venv (1.6 GB) is removed after the module.
    The venv is made without pip and the wheel installed by this environment's pip
    (``pip --python``): a newer pip than the one ``venv`` bundles, with ``--no-compile``
    (bytecode is written on first import instead), about a third of the time of the
    bundled pip's defaults; the installed files are the same otherwise."""
    tmp = tmp_path_factory.mktemp("install")
    src = _copy_repository(tmp / "src")
    dist = tmp / "dist"
    _timed("build (isolated)", [sys.executable, "-m", "build", "--wheel", "--outdir", dist, src], cwd=src)
    (wheel,) = dist.glob("*.whl")
    venv = tmp / "venv"
    _timed("venv", [sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile", wheel]
    _timed("pip install (non-editable)", install, cwd=tmp)
    yield Installed(wheel, python, _user_folder(tmp / "home"), _user_env(tmp, venv))
    shutil.rmtree(venv, ignore_errors=True)


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def _dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        (path,) = [n for n in z.namelist() if n.endswith(f".dist-info/{name}")]
        return z.read(path).decode()


def test_the_wheel_installs_one_package_and_no_tests(installed: Installed) -> None:
    assert _dist_info(installed.wheel, "top_level.txt").split() == ["dprelease"]
    names = _wheel_names(installed.wheel)
    outside = [n for n in names if not n.startswith("dprelease/") and ".dist-info/" not in n]
    assert outside == []
    parts = {part for n in names for part in n.split("/")[:-1]}
    assert not parts & {"tests", "benchmarks", "build", "__pycache__"}, sorted(parts)
    assert "dprelease/flows/demo/adult.csv.gz" in names and "dprelease/flows/demo/adult.csv" not in names
    metadata = _dist_info(installed.wheel, "METADATA")
    assert "License-Expression: Apache-2.0 AND CC-BY-4.0" in metadata.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    print(
        f"[install] wheel {installed.wheel.stat().st_size:,} B, METADATA {len(metadata):,} B", file=sys.stderr
    )


def test_the_installed_package_is_imported_not_the_users_folders(installed: Installed) -> None:
    where = _run(
        [installed.python, "-c", "import dprelease.cli.main, dprelease.tasks; print(dprelease.__file__)"],
        cwd=installed.home,
        env=installed.env,
    )
    assert Path(where.strip()).is_relative_to(installed.python.parent.parent), where
    bare = subprocess.run(
        [installed.python, "-c", "import flows"],
        cwd=installed.home,
        env=installed.env,
        capture_output=True,
        text=True,
    )
    assert "the user's own flows/ was imported" in bare.stderr  # the decoys catch a bare import


def _one_bundle(out: Path) -> Path:
    (bundle,) = [p for p in out.iterdir() if (p / "public" / "release.json").is_file()]
    return bundle


def test_dprelease_demo_from_the_installation(installed: Installed) -> None:
    out = installed.home / "X"
    _timed("dprelease demo", ["dprelease", "demo", "--out", out], cwd=installed.home, env=installed.env)
    bundle = _one_bundle(out)
    doc = json.loads((bundle / "public" / "release.json").read_text())
    assert doc["randomness"]["fit_for_publication"] is True
    assert doc["privacy"]["ledger"]["totals"]["epsilon"] <= 1.0
    header = (bundle / "public" / "synthetic.csv").read_text().splitlines()[0]
    assert header.split(",")[:2] == ["age", "workclass"]
    _run(["dprelease", "audit", "verify", bundle], cwd=installed.home, env=installed.env)  # exit 0: all hold


API_RELEASES = """
import json
from importlib.resources import files

import pandas as pd

import dprelease

demo = dprelease.release(dprelease.Spec.demo(), out="Y")
df = pd.read_csv(files("dprelease.flows") / "demo" / "adult.csv.gz")
given = dprelease.release(dprelease.Spec.demo(), data=df, out="Z")
print(json.dumps({
    "demo": str(demo.path),
    "given": str(given.path),
    "columns": list(given.synthetic.columns),
    "rows": len(given.synthetic),
    "frame": isinstance(given.synthetic, pd.DataFrame),
}))
"""


def test_python_api_releases_from_the_installation(installed: Installed) -> None:
    """``dprelease.release`` with the embedded demo spec, then with a DataFrame as the data,
    from a notebook-like process whose working folder (first on sys.path) holds the decoys."""
    out = _timed(
        "Python API: two releases",
        [installed.python, "-c", API_RELEASES],
        cwd=installed.home,
        env=installed.env,
    )
    got = json.loads(out.strip().splitlines()[-1])
    for key, folder in (("demo", "Y"), ("given", "Z")):
        bundle = Path(got[key])
        bundle = bundle if bundle.is_absolute() else installed.home / bundle
        assert bundle.parent.resolve() == (installed.home / folder).resolve(), got
        assert (bundle / "public" / "release.json").is_file() and (
            bundle / "public" / "synthetic.csv"
        ).is_file()
    assert got["frame"] and got["rows"] > 0 and got["columns"][:2] == ["age", "workclass"], got


def test_a_checkout_without_symlinks_refuses_to_build(tmp_path: Path) -> None:
    """Issue 41: with core.symlinks=false (Git for Windows' default) each dprelease/<layer>
    link is a text file, and `pip install .` built, without a word, a package of five files.
    The build backend now refuses, naming the layers and what to do."""
    src = _copy_repository(tmp_path / "checkout")
    for link in (src / "dprelease").iterdir():
        if link.is_symlink():  # what git writes without symlinks: the target as text
            target = os.readlink(link)
            link.unlink()
            link.write_text(target)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert not list((tmp_path / "dist").glob("*.whl"))
    assert "dprelease/{bundle,checks,cli," in said and "this checkout has no symbolic links" in said, said
    assert "git clone -c core.symlinks=true" in said


def test_every_python_example_of_the_api_page_runs_from_the_installation(installed: Installed) -> None:
    """Issue 41: every ```` ```python ```` block of docs/api.md (the repository's page), one
    after the other as one script, run as written by the installed interpreter in the user's
    folder (first on sys.path, with the decoys): the demo's spec and data come with the wheel."""
    from tests.docs.test_api_examples import api_examples

    script = "\n".join(api_examples())
    out = _timed(
        "docs/api.md's examples", [installed.python, "-c", script], cwd=installed.home, env=installed.env
    )
    bundle = _one_bundle(installed.home / "releases")
    assert f"Release({bundle.name!r} of 'adult'" in out, out
    assert (bundle / "public" / "synthetic.csv").is_file() and (
        installed.home / "releases" / "ledger.db"
    ).is_file()
