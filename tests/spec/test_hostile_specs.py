"""Issue 30: every spec of the hostile corpus (``tests/hostile_specs.py``) is refused by
``load_spec`` with a ``SpecError`` naming its field, within 10 s and 500 MB. Each loads in
a child process whose address space may grow by at most 500 MB (so an attack on memory
fails fast instead of taking the machine), timed there; its growth is bounded above by the
process's peak resident size (VmHWM) less its size before the load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.hostile_specs import CORPUS

SECONDS = 10.0
GROWTH = 500 * 2**20

CHILD = f"""
import json, resource, sys, time
import psutil
from dprelease.spec import SpecError, load_spec

base = psutil.Process().memory_info()
resource.setrlimit(resource.RLIMIT_AS, (base.vms + {GROWTH}, resource.RLIM_INFINITY))
start = time.perf_counter()
try:
    load_spec(sys.argv[1])
    outcome, message = "loaded", ""
except SpecError as e:
    outcome, message = "refused", str(e)
except MemoryError:
    outcome, message = "out of memory", ""
seconds = time.perf_counter() - start
# the peak resident size of this process image (VmHWM); not getrusage's ru_maxrss, which Linux
# carries over from the forking parent (a pytest process of 1.2 GB late in a suite)
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
peak = int(status["VmHWM"].split()[0]) * 1024
print(json.dumps({{"outcome": outcome, "message": message, "seconds": seconds, "growth": peak - base.rss}}))
"""


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_a_hostile_spec_is_refused_quickly_naming_its_field(case, tmp_path):
    spec = case.write(tmp_path)
    try:
        run = subprocess.run(
            [sys.executable, "-c", CHILD, str(spec)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=SECONDS * 6,  # the child's imports and a busy machine; the load itself is timed
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: load_spec ran for more than {SECONDS * 6:g} s")
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["outcome"] == "refused", got
    assert got["seconds"] <= SECONDS, got
    assert got["growth"] <= GROWTH, got
    assert case.field in got["message"] and case.rule in got["message"], got["message"][-500:]
    assert "\x1b" not in got["message"]  # control characters are shown as escapes
