"""``dprelease deploy check``: each deployment of the release flow checked as its first run
would check it, before its first slot, from public facts only (issue 42).

A deployment is read from the Prefect server (what is registered: what will run) or from a
``prefect.yaml`` before ``prefect deploy`` (its ``{{ $VAR }}`` templates filled from this
shell's environment, as ``prefect deploy`` fills them). For each one:

* **code**: the pull step's directory is set, exists, and is this checkout; a deployment
  made from another checkout runs *that* code (its version is named), and one deployed with
  ``DPRELEASE_HOME`` unset has no directory and fails before its flow starts;
* **spec**: ``spec_path`` (relative to that directory) loads, is not a draft, and declares a
  budget policy (a run without one is refused at its slot: ``spec.sections.NEEDS_POLICY``);
* **ledger**: ``ledger_url`` holds no password, and the ledger, where this host can open it,
  is in the format this version writes (``ledger.format``; an older one needs ``dprelease
  ledger migrate`` first). A ledger that does not exist yet is fine (the first run creates
  it); one this host cannot open is reported as not checked.

Nothing here reads a data file or writes anything.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dprelease._version import __version__

__all__ = ["Finding", "PlannedDeployment", "check", "from_prefect_file", "from_server"]

FLOW = "dp-release"
_WORKDIR = "prefect.deployments.steps.set_working_directory"
_TEMPLATE = re.compile(r"\{\{\s*\$(\w+)\s*\}\}")


@dataclass(frozen=True)
class PlannedDeployment:
    """What a run of a deployment will start from: its name, the pull step's working
    directory (None: no such step; "" or a ``{{ }}`` left: unset) and its parameters."""

    name: str
    directory: str | None
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Finding:
    """One check of one deployment: ``ok`` None when it could not be made from here."""

    deployment: str
    check: str
    ok: bool | None
    detail: str


def _directory(steps: list[dict[str, Any]] | None, fill: dict[str, str] | None) -> str | None:
    for step in steps or []:
        if _WORKDIR in step:
            directory = str(step[_WORKDIR].get("directory") or "")
            if fill is not None:
                directory = _TEMPLATE.sub(lambda m: fill.get(m[1], ""), directory)
            return directory
    return None


def from_server() -> list[PlannedDeployment]:
    """The release flow's deployments registered on the Prefect server (``PREFECT_API_URL``)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    with get_client(sync_client=True) as client:
        found = client.read_deployments(flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW])))
    return [
        PlannedDeployment(f"{FLOW}/{d.name}", _directory(d.pull_steps, None), dict(d.parameters))
        for d in found
    ]


def from_prefect_file(path: Path) -> list[PlannedDeployment]:
    """The release flow's deployments a ``prefect.yaml`` declares, as ``prefect deploy`` would
    register them from this shell (templates filled from ``os.environ``)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for d in doc.get("deployments") or []:
        if not str(d.get("entrypoint", "")).endswith(":release"):
            continue
        steps = d.get("pull", doc.get("pull"))
        out.append(
            PlannedDeployment(
                f"{FLOW}/{d.get('name')}", _directory(steps, dict(os.environ)), d.get("parameters") or {}
            )
        )
    return out


def _version_at(folder: Path) -> str:
    """The dprelease version of the checkout at ``folder`` (``unknown`` if it is none)."""
    found = re.search(r'__version__ = "([^"]+)"', _read(folder / "dprelease" / "_version.py"))
    return found[1] if found else "unknown"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _code(d: PlannedDeployment, here: Path) -> tuple[Finding, Path | None]:
    """The pull step's directory, and where ``spec_path`` and ``out_dir`` are resolved from
    (None: nowhere, the directory being unset or absent)."""
    if d.directory is None:
        return Finding(
            d.name, "code", None, "no set_working_directory pull step: runs in the worker's folder"
        ), Path.cwd()
    if not d.directory or "{{" in d.directory:
        return Finding(
            d.name,
            "code",
            False,
            f"the pull step's directory is unset ({d.directory!r}): it was deployed with DPRELEASE_HOME "
            "unset, and every run fails before its flow starts; export DPRELEASE_HOME and deploy again",
        ), None
    folder = Path(d.directory)
    if not folder.is_dir():
        return Finding(
            d.name, "code", False, f"the pull step's directory {folder} does not exist on this host"
        ), folder
    if folder.resolve() != here:
        return Finding(
            d.name,
            "code",
            False,
            f"runs the code in {folder} (dprelease {_version_at(folder)}), not this checkout ({here}, "
            f"dprelease {__version__}): deploy again from this checkout with DPRELEASE_HOME={here}",
        ), folder
    return Finding(d.name, "code", True, f"{folder} (dprelease {__version__})"), folder


def _spec(d: PlannedDeployment, base: Path) -> Finding:
    from dprelease.spec import SpecError, load_spec

    given = d.parameters.get("spec_path")
    if not given:
        return Finding(d.name, "spec", False, "no spec_path parameter")
    path = Path(given) if Path(given).is_absolute() else base / given
    try:
        spec = load_spec(path)
        spec.refuse_draft()
    except (SpecError, FileNotFoundError, ValueError) as e:
        return Finding(d.name, "spec", False, f"{path}: {str(e).splitlines()[0]}")
    p = spec.privacy
    if not p.has_policy:
        return Finding(
            d.name,
            "spec",
            False,
            f"{path} declares no budget policy: every run of this deployment will be refused at its slot. "
            "Add privacy.period (e.g. {length: P1M, epsilon: 1.0, delta: 1e-6}) or privacy.lifetime_epsilon",
        )
    policy = f"period {p.period_budget.length}" if p.period_budget is not None else "lifetime"
    return Finding(d.name, "spec", True, f"{path}: dataset '{spec.dataset.name}', {policy} budget policy")


def _ledger(d: PlannedDeployment, base: Path) -> Finding:
    from dprelease.ledger import Ledger, LedgerError, LedgerFormatError, NoLedger, default_url, parse_url

    given = d.parameters.get("ledger_url")
    try:
        parsed = None if given is None else parse_url(str(given))
    except LedgerError as e:
        return Finding(d.name, "ledger", False, str(e))
    if parsed is not None and parsed.password is not None:
        return Finding(
            d.name, "ledger", False, "ledger_url holds a password, which Prefect stores in clear: remove it"
        )
    out = Path(str(d.parameters.get("out_dir", "releases")))
    url = default_url(out if out.is_absolute() else base / out) if parsed is None else parsed.url
    try:
        with Ledger(url, create=False) as led:
            led.check_writable()
            fmt = led.format.format
    except NoLedger:
        return Finding(d.name, "ledger", True, f"{url}: none yet (the first run creates it)")
    except LedgerFormatError as e:
        return Finding(d.name, "ledger", False, str(e))
    except LedgerError as e:
        return Finding(d.name, "ledger", None, f"{url}: not checked from here ({str(e).splitlines()[0]})")
    return Finding(d.name, "ledger", True, f"{url}: format {fmt}")


def check(deployments: list[PlannedDeployment], here: Path) -> list[Finding]:
    """Every check of every deployment; ``here``: this checkout's folder."""
    out: list[Finding] = []
    for d in deployments:
        code, base = _code(d, here.resolve())
        if base is None:
            unknown = "not checked: the folder spec_path and out_dir are relative to is unknown (code, above)"
            out += [code, Finding(d.name, "spec", None, unknown), Finding(d.name, "ledger", None, unknown)]
        else:
            out += [code, _spec(d, base), _ledger(d, base)]
    return out
