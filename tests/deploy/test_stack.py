"""Issue 20: the production stack in deploy/, as far as one machine on loopback allows.

* the systemd units: ``systemd-analyze verify`` and its offline security score; every
  command they start exists and takes the options they pass; every variable they use is in
  ``dprelease.env.example``, which holds no secret and is valid Prefect and Dask
  configuration; ``with-credentials`` exports the credentials;
* the units' own command lines, run here with paths moved to temporary folders: the Prefect
  server (basic auth on) and the worker for the health check, the Dask scheduler and worker
  with mutual TLS for the release's Dask engine;
* ``deploy/postgres/setup.sql`` on the throw-away PostgreSQL (``.ci/postgres.sh``): a real
  release through the CLI as the least-privileged role, every UPDATE/DELETE refused, the
  Prefect server migrating its database as a non-superuser;
* ``deploy/backup.py``: backups, retention, and restores that ``dprelease audit verify``
  accepts (and a missing or empty ledger that it refuses), on SQLite and PostgreSQL.

Every process a test starts is stopped at its end."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest

from dprelease.ledger import Ledger
from tests.helpers import adult_rows, record_release, write_spec

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEPLOY = ROOT / "deploy"
UNITS = DEPLOY / "systemd"
SETUP_SQL = DEPLOY / "postgres" / "setup.sql"
POOL = "dprelease-process"
AUTH = "ops:correct-horse-battery"


# ---------------------------------------------------------------- reading the units as systemd does


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections → keys → values (a key may repeat: LoadCredential, Environment)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def env_example(commented: bool = False) -> dict[str, str]:
    """The assignments of ``dprelease.env.example`` (with ``commented``, also those left
    commented out for the operator to enable, e.g. the Dask client's certificates)."""
    out = {}
    for line in (UNITS / "dprelease.env.example").read_text().splitlines():
        m = re.fullmatch(
            r"#?([A-Z][A-Z0-9_]*)=(.*)" if commented else r"([A-Z][A-Z0-9_]*)=(.*)", line.strip()
        )
        if m:
            out[m.group(1)] = m.group(2)
    return out


def unit_files() -> list[Path]:
    return sorted(p for p in UNITS.iterdir() if p.suffix in (".service", ".timer"))


class Here:
    """Where a unit's absolute paths live in this test: the checkout, this venv, temporary
    folders for /etc/dprelease/tls, the state and cache directories."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.paths = {
            "/opt/dprelease/.venv/bin": str(BIN),
            "/opt/dprelease": str(ROOT),
            "/etc/dprelease/tls": str(tmp / "tls"),
            "/var/lib/prefect": str(tmp / "state-prefect"),
            "/var/lib/dprelease": str(tmp / "state-dprelease"),
            "/var/cache/dprelease-dask": str(tmp / "cache-dask"),
        }

    def path(self, word: str) -> str:
        for real, here in self.paths.items():
            if word.startswith(real):
                return here + word[len(real) :]
        return word

    def specifiers(self, text: str, instance: str = "1", creds: Path | None = None) -> str:
        return (
            text.replace("%H", socket.gethostname())
            .replace("%i", instance)
            .replace("%d", str(creds or ""))
            .replace("%%", "%")
        )

    def command(self, unit: str, env: dict[str, str], instance: str = "1") -> list[str]:
        """The unit's ExecStart: ``${VAR}`` from ``env`` (as systemd does, one word each),
        specifiers, paths moved here."""
        (line,) = read_unit(UNITS / unit)["Service"]["ExecStart"]
        line = re.sub(r"\$\{(\w+)\}", lambda m: shlex.quote(env[m.group(1)]), line)
        return [self.path(w) for w in shlex.split(self.specifiers(line, instance))]

    def environment(self, unit: str, creds: Path) -> dict[str, str]:
        """The unit's Environment= assignments, specifiers and paths resolved."""
        out = {}
        for value in read_unit(UNITS / unit)["Service"].get("Environment", []):
            k, _, v = self.specifiers(value, creds=creds).partition("=")
            out[k] = self.path(v)
        return out

    def credentials(self, unit: str, values: dict[str, str]) -> Path:
        """A credentials folder holding each of the unit's LoadCredential names (every one
        must be given a value), as systemd's $CREDENTIALS_DIRECTORY (mode 0400 files)."""
        folder = self.tmp / f"creds-{unit}"
        folder.mkdir(mode=0o700, exist_ok=True)
        names = [v.split(":", 1)[0] for v in read_unit(UNITS / unit)["Service"].get("LoadCredential", [])]
        assert sorted(names) == sorted(values), f"{unit} loads {names}"
        for name in names:
            f = folder / name
            f.write_text(values[name] + "\n")
            f.chmod(0o400)
        return folder


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any Prefect setting or ledger URL, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DPRELEASE_LEDGER", "DASK_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        GX_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, env, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def words(out: subprocess.CompletedProcess) -> str:
    """stdout and stderr as one line of words (rich's panels and wrapping removed)."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", out.stdout + out.stderr).split())


@contextmanager
def started(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """A process in its own session, stopped (SIGTERM, then SIGKILL) on exit."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL after 30 s; then any descendant that left the
    group and still lives."""
    import psutil

    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    alive = [p for p in descendants if p.is_running()]
    for p in alive:
        with suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=10)


def wait_healthy(api_url: str, proc: subprocess.Popen, log: Path, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.5)
    pytest.fail(f"prefect server did not become healthy in {limit:.0f} s: {log.read_text()[-2000:]}")


# ---------------------------------------------------------------- the units, statically


def test_units_pass_systemd_analyze_verify_and_security(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd)")
    here = Here(tmp_path)
    names = []
    for unit in unit_files():
        text = unit.read_text()
        for real, mine in here.paths.items():
            text = text.replace(real, mine)
        name = unit.name.replace("@.", "@1.")  # a template is verified as an instance
        (tmp_path / name).write_text(text)
        names.append(name)
    out = run([tool, "verify", "--man=no", *names], os.environ, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    for name in names:
        if name.endswith(".service"):
            sec = run(
                [tool, "security", "--offline=true", "--threshold=25", "--no-pager", name],
                os.environ,
                cwd=tmp_path,
            )
            assert sec.returncode == 0, f"{name}: {sec.stdout[-400:]}{sec.stderr}"


def test_units_commands_options_and_variables():
    documented = env_example()
    text_of_example = (UNITS / "dprelease.env.example").read_text()
    services = [u for u in unit_files() if u.suffix == ".service"]
    assert {u.name for u in services} >= {
        "prefect-server.service",
        "prefect-worker.service",
        "dask-scheduler.service",
        "dask-worker@.service",
        "dprelease-backup.service",
        "dprelease-healthcheck.service",
    }
    helps: dict[tuple[str, ...], str] = {}
    for unit in services:
        svc = read_unit(unit)["Service"]
        assert svc["EnvironmentFile"] == ["/etc/dprelease/dprelease.env"], unit.name
        assert svc.get("NoNewPrivileges") == ["yes"] and svc.get("ProtectSystem") == ["strict"], unit.name
        if svc["Type"] != ["oneshot"]:
            assert svc.get("Restart") in (["always"], ["on-failure"]), unit.name
        (line,) = svc["ExecStart"]
        used = set(re.findall(r"\$\{(\w+)\}", line))
        assert used <= set(documented), (
            f"{unit.name} uses {sorted(used - set(documented))}, not in the example"
        )
        for cred in svc.get("LoadCredential", []):
            name, _, source = cred.partition(":")
            assert source.startswith("/etc/dprelease/credentials/"), cred
            if name != "pgpass":  # an environment variable: documented, never assigned in the file
                assert name in text_of_example and name not in documented, name
        argv = shlex.split(line)
        if argv[0].endswith("/with-credentials"):
            argv = argv[1:]
        if argv[0] == "/usr/bin/env":  # env --default-signal=INT (prefect-worker.service)
            assert all(w.startswith("--default-signal=") for w in argv[1:2]), argv
            argv = argv[2:]
        assert argv[0].startswith("/opt/dprelease/"), argv[0]
        exe = Path(Here(ROOT).path(argv[0]))
        assert exe.is_file() and os.access(exe, os.X_OK), f"{unit.name}: {exe} is not an executable here"
        prefix = [str(exe)] + [
            Here(ROOT).path(w) for w in itertools.takewhile(lambda w: w[0] != "-", argv[1:])
        ]
        if prefix[-1].startswith("${"):  # dask worker ${SCHEDULER}: the address is an argument
            prefix = prefix[:-1]
        key = tuple(prefix)
        if key not in helps:
            out = run([*prefix, "--help"], clean_env(COLUMNS="200"), timeout=60)
            assert out.returncode == 0, f"{key}: {out.stderr[-500:]}"
            helps[key] = out.stdout
        for flag in {w.split("=")[0] for w in argv if w.startswith("--")}:
            assert flag in helps[key], f"{unit.name}: {' '.join(prefix)} has no option {flag}"
    for timer in [u for u in unit_files() if u.suffix == ".timer"]:
        assert (UNITS / timer.name.replace(".timer", ".service")).is_file()


def test_env_example_is_valid_prefect_and_dask_configuration(tmp_path):
    from prefect.settings import Settings
    from prefect.settings.legacy import _get_settings_fields

    example = env_example(commented=True)  # the lines an operator may enable, too
    known = set(_get_settings_fields(Settings))
    unknown = sorted(k for k in example if k.startswith("PREFECT_") and k not in known)
    assert not unknown, f"not Prefect settings: {unknown}"
    secrets = [k for k in example if "PASSWORD" in k or "AUTH_STRING" in k]
    assert not secrets, f"secrets belong in credentials, not in the environment file: {secrets}"
    with_password = [v for v in example.values() if re.match(r"\w[\w+]*://[^/@]*:[^/@]*@", v)]
    assert not with_password, with_password
    probe = (
        "import json, dask, distributed\n"
        "from prefect.settings import get_current_settings\n"
        "s = get_current_settings()\n"
        "print(json.dumps({'vacuum': sorted(s.server.services.db_vacuum.enabled_vacuum_types),"
        " 'events_days': s.server.events.retention_period.days,"
        " 'runs_days': s.server.services.db_vacuum.retention_period.days,"
        " 'db': s.server.database.connection_url.get_secret_value(),"
        " 'ca': dask.config.get('distributed.comm.tls.ca-file'),"
        " 'cert': dask.config.get('distributed.comm.tls.client.cert'),"
        " 'key': dask.config.get('distributed.comm.tls.client.key')}))\n"
    )
    env = clean_env(**example, PREFECT_HOME=str(tmp_path))
    out = run([sys.executable, "-W", "error", "-c", probe], env, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["vacuum"] == ["events", "flow_runs", "orphans"] and got["events_days"] == 30
    assert got["runs_days"] == 90 and got["db"].startswith("postgresql+asyncpg://prefect@")
    assert got["ca"] and got["cert"] and got["key"]


def test_with_credentials_exports_variable_named_credentials(tmp_path):
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "DPRELEASE_LEDGER_PASSWORD").write_text("p@ss word$1\n")
    (creds / "pgpass").write_text("*:*:*:*:x\n")
    (creds / "9BAD").write_text("x\n")
    names = ("DPRELEASE_LEDGER_PASSWORD", "pgpass", "9BAD")
    show = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))"
    out = run(
        [UNITS / "with-credentials", sys.executable, "-c", show],
        {**os.environ, "CREDENTIALS_DIRECTORY": str(creds)},
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "DPRELEASE_LEDGER_PASSWORD": "p@ss word$1",
        "pgpass": None,
        "9BAD": None,
    }
    bare = run([UNITS / "with-credentials", sys.executable, "-c", "print('ran')"], clean_env())
    assert bare.stdout.strip() == "ran"  # outside systemd: no credentials, the command still runs


# ---------------------------------------------------------------- the server, the worker and the health check


@pytest.fixture(scope="module")
def stack_server(tmp_path_factory):
    """``prefect server start`` from prefect-server.service (basic auth from its credential,
    loopback); the scheduler service is off so that the test decides which runs exist."""
    tmp = tmp_path_factory.mktemp("stack-server")
    here = Here(tmp)
    port = free_port()
    creds = here.credentials("prefect-server.service", {"pgpass": "", "PREFECT_SERVER_API_AUTH_STRING": AUTH})
    unit_env = here.environment("prefect-server.service", creds)
    Path(unit_env["PREFECT_HOME"]).mkdir(parents=True)
    env = clean_env(
        **unit_env,
        CREDENTIALS_DIRECTORY=str(creds),
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_UI_ENABLED="false",
        PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED="false",
    )
    env.pop("PGPASSFILE")  # SQLite here
    log = tmp / "server.log"
    api = f"http://127.0.0.1:{port}/api"
    with started(here.command("prefect-server.service", env), env, log) as proc:
        wait_healthy(api, proc, log)
        yield here, api


def _create_run(api: httpx.Client, deployment_id: str, when: dt.datetime) -> str:
    """A scheduled run, created as Prefect's client would: a 503 (the server's database busy;
    one full CI run met it) is retried, up to 5 times, as Prefect's client retries it."""
    for attempt in range(6):
        r = api.post(
            f"/deployments/{deployment_id}/create_flow_run",
            json={"state": {"type": "SCHEDULED", "state_details": {"scheduled_time": when.isoformat()}}},
        )
        if r.status_code != 503 or attempt == 5:
            break
        time.sleep(2**attempt)
    r.raise_for_status()
    return r.json()["id"]


@pytest.mark.deploy
def test_healthcheck_against_the_units_server_and_worker(stack_server, tmp_path):
    here, api_url = stack_server
    whport = free_port()
    client_env = clean_env(
        PREFECT_API_URL=api_url,
        PREFECT_HOME=str(tmp_path / "client-home"),
        DPRELEASE_POOL=POOL,
        DPRELEASE_DEPLOYMENT="dp-release/adult-monthly",
        PREFECT_WORKER_WEBSERVER_HOST="127.0.0.1",
        PREFECT_WORKER_WEBSERVER_PORT=str(whport),
    )
    hc_creds = here.credentials("dprelease-healthcheck.service", {"PREFECT_API_AUTH_STRING": AUTH})
    unit_check = here.command("dprelease-healthcheck.service", client_env)

    def check(*args: str, creds: bool = True) -> tuple[int, str]:
        env = {**client_env, "CREDENTIALS_DIRECTORY": str(hc_creds)} if creds else client_env
        cmd = (
            unit_check if not args else [unit_check[0], sys.executable, str(DEPLOY / "healthcheck.py"), *args]
        )
        out = run(cmd, env, timeout=60)
        assert out.returncode in (0, 1), out.stderr[-2000:]
        return out.returncode, out.stdout

    rc, out = check("--pool", POOL, creds=False)
    assert (
        rc == 1 and "refused this client's credentials (HTTP 401)" in out and "PREFECT_API_AUTH_STRING" in out
    )
    rc, out = check("--pool", POOL)
    assert rc == 1 and "ok    server" in out and f"work pool '{POOL}' does not exist" in out

    api = httpx.Client(base_url=api_url, auth=tuple(AUTH.split(":")), timeout=30)
    api.post("/work_pools/", json={"name": POOL, "type": "process"}).raise_for_status()
    flow_id = api.post("/flows/", json={"name": "dp-release"}).json()["id"]
    dep = api.post(
        "/deployments/",
        json={
            "name": "adult-monthly",
            "flow_id": flow_id,
            "work_pool_name": POOL,
            "entrypoint": "flows/release.py:release",
            "schedules": [{"schedule": {"cron": "0 3 1 * *", "timezone": "Europe/Paris"}, "active": True}],
        },
    ).json()
    rc, out = check("--pool", POOL, "--deployment", "dp-release/adult-monthly")
    assert rc == 1 and "no worker has ever polled it" in out
    assert "no upcoming scheduled run: the server's scheduler created none" in out

    now = dt.datetime.now(dt.UTC)
    late = _create_run(api, dep["id"], now - dt.timedelta(hours=2))
    _create_run(api, dep["id"], now + dt.timedelta(days=20))
    rc, out = check("--pool", POOL, "--deployment", "dp-release/adult-monthly")
    assert rc == 1 and "1 scheduled run(s) of deployment 'dp-release/adult-monthly' overdue" in out
    api.delete(f"/flow_runs/{late}").raise_for_status()

    wcreds = here.credentials(
        "prefect-worker.service", {"PREFECT_API_AUTH_STRING": AUTH, "DPRELEASE_LEDGER_PASSWORD": "unused"}
    )
    wenv = {
        **client_env,
        **here.environment("prefect-worker.service", wcreds),
        "CREDENTIALS_DIRECTORY": str(wcreds),
        "PREFECT_WORKER_HEARTBEAT_SECONDS": "2",
        "DPRELEASE_HOME": str(ROOT),
    }
    with started(here.command("prefect-worker.service", wenv), wenv, tmp_path / "worker.log") as worker:
        deadline = time.monotonic() + 60
        while (rc := check()[0]) != 0 and time.monotonic() < deadline:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(1)
        rc, out = check()  # the unit's own command line: pool, deployment and the worker's endpoint
        assert rc == 0, out
        assert f"ready worker(s): {socket.gethostname()}" in out and "1 upcoming run(s)" in out
        assert f"ok    worker: http://127.0.0.1:{whport}/health answers OK" in out
        for directory, said in (
            (str(tmp_path), f"runs the code in {tmp_path} (dprelease unknown)"),
            ("", "unset"),
        ):
            elsewhere = {"prefect.deployments.steps.set_working_directory": {"directory": directory}}
            api.patch(f"/deployments/{dep['id']}", json={"pull_steps": [elsewhere]}).raise_for_status()
            rc, out = check()  # a deployment made from another checkout, or with DPRELEASE_HOME unset
            assert rc == 1 and said in out, out
        here_step = {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}
        api.patch(f"/deployments/{dep['id']}", json={"pull_steps": [here_step]}).raise_for_status()
        assert check()[0] == 0
    deadline = time.monotonic() + 30  # the worker is gone: 3 heartbeats (6 s) later it is not ready
    while "known workers, none ready" not in (out := check()[1]) and time.monotonic() < deadline:
        time.sleep(1)
    assert "known workers, none ready" in out and f"{socket.gethostname()} (last heartbeat" in out
    assert f"FAIL  worker: http://127.0.0.1:{whport}/health does not answer" in out

    rc, out = check("--api-url", f"http://127.0.0.1:{free_port()}/api")
    assert rc == 1 and "does not answer (ConnectError); is prefect-server running?" in out


# ---------------------------------------------------------------- Dask with mutual TLS


def _tls_files(folder: Path) -> None:
    """A CA, certificates for the scheduler, a worker and a client signed by it, and a
    client certificate from another CA (``rogue-client``)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def write(name, cert, key):
        (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (folder / f"{name}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    def build(cn, issuer, issuer_key, ca):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(issuer or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return b.sign(issuer_key or key, hashes.SHA256()), key

    ca, ca_key = build("dprelease test CA", None, None, True)
    write("dask-ca", ca, ca_key)
    for name in ("dask-scheduler", "dask-worker", "dask-client"):
        write(name, *build(name, ca.subject, ca_key, False))
    rogue, rogue_key = build("rogue CA", None, None, True)
    write("rogue-client", *build("rogue-client", rogue.subject, rogue_key, False))


@pytest.mark.deploy
def test_dask_units_with_mutual_tls_and_the_release_engine(tmp_path):
    here = Here(tmp_path)
    tls = Path(here.paths["/etc/dprelease/tls"])
    _tls_files(tls)
    Path(here.paths["/var/cache/dprelease-dask"], "1").mkdir(parents=True)
    port = free_port()
    example = env_example(commented=True)
    env = clean_env(
        DPRELEASE_DASK_HOST="127.0.0.1",
        DPRELEASE_DASK_PORT=str(port),
        DPRELEASE_DASK_DASHBOARD="127.0.0.1:0",
        DPRELEASE_DASK_SCHEDULER=f"tls://127.0.0.1:{port}",
        DPRELEASE_DASK_THREADS="1",
        DPRELEASE_DASK_MEMORY="1GiB",
    )
    write_spec(tmp_path, adult_rows(2000))
    engine_probe = (
        "import sys; from pathlib import Path\n"
        "from engines.runners import DaskEngine\n"
        "e = DaskEngine(Path(sys.argv[1]), 500, sys.argv[2], None)\n"
        "print('workers', e.workers, 'sum', e.client.submit(sum, [1, 2]).result())\n"
        "e.close()\n"
    )
    with (
        started(here.command("dask-scheduler.service", env), env, tmp_path / "scheduler.log"),
        started(here.command("dask-worker@.service", env), env, tmp_path / "worker.log") as worker,
    ):
        # the Dask client's certificate from the variables of dprelease.env.example
        client = {k: here.path(v) for k, v in example.items() if k.startswith("DASK_DISTRIBUTED__COMM__TLS")}
        deadline = time.monotonic() + 60
        while True:
            out = run(
                [sys.executable, "-c", engine_probe, tmp_path / "data.csv", f"tls://127.0.0.1:{port}"],
                {**env, **client},
                timeout=60,
            )
            if "workers 1 sum 3" in out.stdout or time.monotonic() > deadline:
                break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(1)
        assert "workers 1 sum 3" in out.stdout, (
            out.stderr[-2000:] + (tmp_path / "scheduler.log").read_text()[-2000:]
        )
        connect = (  # a client that fails within 5 s if the scheduler refuses it
            "import sys; from distributed import Client\n"
            "with Client(sys.argv[1], timeout='5s') as c:\n"
            "    print('connected', c.submit(sum, [1, 2]).result())\n"
        )
        rogue = {
            **client,
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(tls / "rogue-client.pem"),
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(tls / "rogue-client.key"),
        }
        addr = f"tls://127.0.0.1:{port}"
        assert (
            "connected 3" in run([sys.executable, "-c", connect, addr], {**env, **client}, timeout=60).stdout
        )
        for who, extra, where in (
            ("a certificate from another CA", rogue, addr),
            ("plain tcp", client, f"tcp://127.0.0.1:{port}"),
        ):
            refused = run([sys.executable, "-c", connect, where], {**env, **extra}, timeout=60)
            assert refused.returncode != 0 and "connected" not in refused.stdout, who


# ---------------------------------------------------------------- backups and restores on SQLite


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory) -> Path:
    """One PREFECT_HOME for the module's CLI releases (the second starts warm)."""
    return tmp_path_factory.mktemp("cli-prefect-home")


def cli_release(tmp: Path, home: Path, ledger: str | None = None) -> Path:
    """A real small release with ``dprelease release`` (checks off); its bundle."""
    spec = write_spec(tmp, adult_rows(400), checks={"enabled": False})
    args = [BIN / "dprelease", "release", spec, "--out", tmp / "out"]
    if ledger:
        args += ["--ledger", ledger]
    out = run(args, clean_env(PREFECT_HOME=str(home)), timeout=240)
    assert out.returncode == 0, words(out)[-3000:]
    (bundle,) = [p for p in (tmp / "out").iterdir() if p.name.startswith("adult-")]
    return bundle


def audit(bundle: Path, ledger: str) -> subprocess.CompletedProcess:
    """``dprelease audit verify`` (wide, so that no table cell wraps)."""
    return run(
        [BIN / "dprelease", "audit", "verify", bundle, "--ledger", ledger],
        clean_env(COLUMNS="400"),
        timeout=60,
    )


def backup_py(*args, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run([sys.executable, DEPLOY / "backup.py", *args], env or clean_env(), timeout=120)


@pytest.fixture(scope="module")
def sqlite_release(tmp_path_factory, cli_home) -> tuple[Path, str]:
    """A real release with the default SQLite ledger: (its bundle, the ledger's URL)."""
    tmp = tmp_path_factory.mktemp("sqlite-release")
    return cli_release(tmp, cli_home), f"sqlite:///{tmp / 'out' / 'ledger.db'}"


def _by_time(folder: Path) -> list[Path]:
    """The backups' manifests in ``folder``, oldest first."""
    return sorted(folder.glob("*.json"), key=lambda m: json.loads(m.read_text())["started"])


@pytest.mark.e2e
def test_sqlite_backups_keep_the_newest_n_with_their_chain_head(sqlite_release, cli_home, tmp_path):
    _, url = sqlite_release
    dest = tmp_path / "backups"
    prefect_db = f"sqlite+aiosqlite:///{cli_home / 'prefect.db'}"
    for _ in range(3):
        out = backup_py("backup", "--dest", dest, "--ledger", url, "--prefect-db", prefect_db, "--keep", "2")
        assert out.returncode == 0, words(out)
    with Ledger(url, create=False) as led:
        seq, head = led.head()
    assert f"chain head: row {seq}, sha256 {head}" in out.stdout and "removed" in out.stdout
    manifests = _by_time(dest / "ledger")
    assert len(manifests) == 2 and len(_by_time(dest / "prefect")) == 2
    assert len(list((dest / "ledger").glob("*.sqlite"))) == 2 and len(list((dest / "prefect").iterdir())) == 4
    newest = json.loads(manifests[-1].read_text())
    assert newest["ledger"] == {"head": {"seq": seq, "hash": head}, "chain_problems": []}
    assert newest["source"] == url and newest["format"] == "sqlite"
    assert (dest / "ledger").stat().st_mode & 0o777 == 0o700
    assert (dest / "ledger" / newest["file"]).stat().st_mode & 0o777 == 0o600
    assert backup_py("list", "--dest", dest).stdout.count(f"head row {seq} {head}") == 2

    pm = _by_time(dest / "prefect")[-1]  # the Prefect database's copy opens and holds the runs
    copy = tmp_path / "prefect-restored.db"
    assert backup_py("restore", pm, "--to", f"sqlite+aiosqlite:///{copy}").returncode == 0
    with sqlite3.connect(copy) as db:
        assert db.execute("SELECT count(*) FROM flow_run").fetchone()[0] >= 1


@pytest.mark.e2e
def test_sqlite_restore_is_what_audit_verify_accepts(sqlite_release, tmp_path):
    bundle, url = sqlite_release
    ledger_db = Path(url.removeprefix("sqlite:///"))
    dest = tmp_path / "backups"
    assert backup_py("backup", "--dest", dest, "--ledger", url, "--prefect-db", "none").returncode == 0
    (manifest,) = _by_time(dest / "ledger")
    assert audit(bundle, url).returncode == 0
    ledger_db.unlink()  # the ledger is lost
    gone = audit(bundle, url)
    assert gone.returncode == 1 and "there is no ledger" in words(gone)
    restored = backup_py("restore", manifest, "--to", url)
    assert restored.returncode == 0 and "chain intact and equal to the backup's head" in restored.stdout
    ok = audit(bundle, url)
    assert ok.returncode == 0, words(ok)[-2000:]

    again = backup_py("restore", manifest, "--to", url)
    assert again.returncode == 1 and "pass --replace" in again.stdout
    assert backup_py("restore", manifest, "--to", url, "--replace").returncode == 0
    assert len(list(ledger_db.parent.glob("ledger.db.before-restore-*"))) == 1

    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    Ledger(empty).close()  # a ledger with no rows: the bundle's rows are not in it
    refused = audit(bundle, empty)
    assert refused.returncode == 1 and "checks failed" in words(refused)


def test_backups_refuse_a_tampered_file_and_keep_everything_after_a_broken_chain(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as led:
        for i in range(2):
            record_release(led, f"r-{i}")
    dest = tmp_path / "backups"
    for _ in range(2):
        assert backup_py("backup", "--dest", dest, "--ledger", url, "--prefect-db", "none").returncode == 0
    manifest = _by_time(dest / "ledger")[-1]
    data = dest / "ledger" / json.loads(manifest.read_text())["file"]
    data.write_bytes(data.read_bytes()[:-1] + b"\x00")
    tampered = backup_py("restore", manifest, "--to", f"sqlite:///{tmp_path / 'other.db'}")
    assert tampered.returncode == 1 and "does not match its manifest's sha256" in tampered.stdout
    assert not (tmp_path / "other.db").exists()

    with sqlite3.connect(tmp_path / "ledger.db") as db:  # someone edits a row
        db.execute("UPDATE ledger_entries SET epsilon = 0.001 WHERE seq = 2")
    before = {p.name for p in (dest / "ledger").iterdir()}
    broken = backup_py("backup", "--dest", dest, "--ledger", url, "--prefect-db", "none", "--keep", "1")
    assert broken.returncode == 1 and "the backed-up chain is broken" in broken.stdout
    assert "nothing pruned" in broken.stdout and before < {p.name for p in (dest / "ledger").iterdir()}
    nothing = backup_py("backup", "--dest", dest, "--prefect-db", "none")
    assert nothing.returncode == 2 and "nothing to back up" in nothing.stderr


# ---------------------------------------------------------------- PostgreSQL: setup.sql, roles, backups


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _at(url: str, user: str | None = None, db: str | None = None, driver: str = "postgresql+psycopg") -> str:
    from sqlalchemy.engine import make_url

    u = make_url(url).set(drivername=driver)
    return u.set(username=user or u.username, database=db or u.database).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def pg_stack(postgres_url, tmp_path_factory, cli_home):
    """deploy/postgres/setup.sql (run twice: it is idempotent) with names of this test, and a
    real release through the CLI as the ledger's writer role."""
    if shutil.which("psql") is None or shutil.which("pg_dump") is None:
        pytest.skip("psql/pg_dump are not installed (Debian: postgresql-client)")
    p = f"t{uuid.uuid4().hex[:8]}_"
    names = {
        "prefect_role": f"{p}prefect",
        "prefect_db": f"{p}prefect",
        "ledger_db": f"{p}ledger",
        "ledger_owner": f"{p}owner",
        "ledger_writer": f"{p}writer",
        "ledger_reader": f"{p}reader",
    }
    setup = [shutil.which("psql"), _libpq(postgres_url), "-q", "-v", "ON_ERROR_STOP=1", "-f", SETUP_SQL]
    for k, v in names.items():
        setup += ["-v", f"{k}={v}"]
    tmp = tmp_path_factory.mktemp("pg-stack")
    try:
        for _ in range(2):
            out = run(setup, clean_env(), timeout=60)
            assert out.returncode == 0, out.stderr
        writer = _at(postgres_url, names["ledger_writer"], names["ledger_db"])
        bundle = cli_release(tmp, cli_home, ledger=writer)
        yield {
            **names,
            "prefix": p,
            "setup": setup,
            "admin": postgres_url,
            "writer": writer,
            "reader": _at(postgres_url, names["ledger_reader"], names["ledger_db"]),
            "bundle": bundle,
        }
    finally:
        from sqlalchemy import create_engine, text

        admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            for db in (names["prefect_db"], names["ledger_db"], f"{p}prefect2"):
                c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            for role in ("prefect_role", "ledger_writer", "ledger_reader", "ledger_owner"):
                c.execute(text(f'DROP ROLE IF EXISTS "{names[role]}"'))
        admin.dispose()


def _refused(url: str, sql: str) -> str:
    """The error ``sql`` gets as the URL's role (it must be refused)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DBAPIError

    engine = create_engine(url)
    try:
        with engine.begin() as c:
            c.execute(text(sql))
    except DBAPIError as e:
        assert e.orig.sqlstate == "42501", e.orig  # insufficient_privilege
        return str(e.orig)
    finally:
        engine.dispose()
    pytest.fail(f"{sql!r} was allowed")


def _schema(url: str) -> dict:
    from sqlalchemy import create_engine, inspect

    engine = create_engine(url)
    try:
        i = inspect(engine)
        return {
            t: {
                "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in i.get_columns(t)],
                "pk": i.get_pk_constraint(t)["constrained_columns"],
                "indexes": sorted(
                    (x["name"], tuple(x["column_names"]), x["unique"]) for x in i.get_indexes(t)
                ),
            }
            for t in sorted(i.get_table_names())
        }
    finally:
        engine.dispose()


@pytest.mark.e2e
def test_postgres_setup_least_privilege_for_the_ledger(pg_stack, postgres_database):
    s = pg_stack
    Ledger(postgres_database).close()  # the tables as ledger/database.py creates them
    assert _schema(_at(s["admin"], db=s["ledger_db"])) == _schema(postgres_database)

    with Ledger(s["reader"], create=False) as led:
        (rel,) = led.releases()
        assert rel["status"] == "released" and rel["release_id"] == s["bundle"].name
        assert led.verify_chain() == []
    for sql in (
        "UPDATE ledger_entries SET epsilon = 0",
        "DELETE FROM ledger_entries",
        "TRUNCATE ledger_entries",
        "INSERT INTO ledger_head (id, seq, hash) VALUES (2, 0, 'x')",
        "DELETE FROM ledger_head",
        "CREATE TABLE ledger_shadow (i int)",
    ):  # refused by the grants, before any trigger
        assert "permission denied" in _refused(s["writer"], sql), sql
    for sql in ("INSERT INTO ledger_entries (seq) VALUES (999)", "UPDATE ledger_head SET seq = 0"):
        assert "permission denied" in _refused(s["reader"], sql), sql
    for sql in (
        "UPDATE ledger_entries SET epsilon = 0",
        "DELETE FROM ledger_entries",
        "TRUNCATE ledger_entries",
    ):
        assert "append-only" in _refused(_at(s["admin"], db=s["ledger_db"]), sql)  # even a superuser
    shown = run([BIN / "dprelease", "ledger", "show", "--ledger", s["reader"]], clean_env(), timeout=60)
    assert shown.returncode == 0 and "hash chain intact" in words(shown)
    ok = audit(s["bundle"], s["reader"])
    assert ok.returncode == 0, words(ok)[-2000:]


@pytest.mark.e2e
def test_postgres_backup_and_restore_into_a_new_database(pg_stack, tmp_path):
    from sqlalchemy import create_engine, text

    s = pg_stack
    dest = tmp_path / "backups"
    out = backup_py("backup", "--dest", dest, "--ledger", s["reader"], "--prefect-db", "none")
    assert out.returncode == 0, words(out)
    (manifest,) = (dest / "ledger").glob("*.json")
    with Ledger(s["reader"], create=False) as led:
        assert json.loads(manifest.read_text())["ledger"]["head"] == dict(
            zip(("seq", "hash"), led.head(), strict=True)
        )

    admin = create_engine(s["admin"], isolation_level="AUTOCOMMIT")
    with admin.connect() as c:  # the ledger's database is lost, and created again empty
        c.execute(text(f'DROP DATABASE "{s["ledger_db"]}" WITH (FORCE)'))
        lost = audit(s["bundle"], s["reader"])
        assert lost.returncode == 1 and "cannot be opened" in words(lost)
        c.execute(text(f'CREATE DATABASE "{s["ledger_db"]}" OWNER "{s["ledger_owner"]}"'))
    admin.dispose()
    assert run(s["setup"], clean_env(), timeout=60).returncode == 0  # roles and empty tables again
    assert audit(s["bundle"], s["reader"]).returncode == 1  # an empty ledger: the rows are not there
    target = _at(s["admin"], db=s["ledger_db"], driver="postgresql")
    refused = backup_py("restore", manifest, "--to", target)
    assert refused.returncode == 1 and "is not empty" in refused.stdout
    admin = create_engine(s["admin"], isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE "{s["ledger_db"]}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{s["ledger_db"]}" OWNER "{s["ledger_owner"]}"'))
    admin.dispose()
    restored = backup_py("restore", manifest, "--to", target)
    assert restored.returncode == 0, words(restored)
    assert "chain intact and equal to the backup's head" in restored.stdout and "setup.sql" in restored.stdout
    assert run(s["setup"], clean_env(), timeout=60).returncode == 0  # the grants, again
    ok = audit(s["bundle"], s["reader"])
    assert ok.returncode == 0, words(ok)[-2000:]
    with Ledger(s["writer"]) as led:  # the writer can append again, and still not rewrite
        record_release(led, "after-restore", dataset="restore-check")
        assert led.verify_chain() == []
    assert "permission denied" in _refused(s["writer"], "DELETE FROM ledger_entries")
    assert "append-only" in _refused(
        _at(s["admin"], db=s["ledger_db"]), "UPDATE ledger_entries SET epsilon = 0"
    )


@pytest.mark.deploy
def test_prefect_server_on_postgres_as_its_own_role_and_its_backup(pg_stack, tmp_path):
    from sqlalchemy import create_engine, text

    s = pg_stack
    here = Here(tmp_path)
    port = free_port()
    db_url = _at(s["admin"], s["prefect_role"], s["prefect_db"], driver="postgresql+asyncpg")
    creds = here.credentials("prefect-server.service", {"pgpass": "", "PREFECT_SERVER_API_AUTH_STRING": AUTH})
    unit_env = here.environment("prefect-server.service", creds)
    Path(unit_env["PREFECT_HOME"]).mkdir(parents=True)
    env = clean_env(
        **unit_env,
        CREDENTIALS_DIRECTORY=str(creds),
        PREFECT_SERVER_DATABASE_CONNECTION_URL=db_url,
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_UI_ENABLED="false",
    )
    api = f"http://127.0.0.1:{port}/api"
    log = tmp_path / "server.log"
    with started(here.command("prefect-server.service", env), env, log) as proc:
        wait_healthy(api, proc, log, limit=150)  # migrations, pg_trgm included, as a non-superuser
        httpx.post(
            f"{api}/work_pools/", json={"name": POOL, "type": "process"}, auth=tuple(AUTH.split(":"))
        ).raise_for_status()
        out = backup_py("backup", "--dest", tmp_path / "b", "--prefect-db", db_url, env=clean_env())
        assert out.returncode == 0 and "ok    prefect" in out.stdout, words(out)
    (manifest,) = (tmp_path / "b" / "prefect").glob("*.json")
    admin = create_engine(s["admin"], isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{s["prefix"]}prefect2" OWNER "{s["prefect_role"]}"'))
    admin.dispose()
    copy = _at(s["admin"], db=f"{s['prefix']}prefect2", driver="postgresql")
    assert backup_py("restore", manifest, "--to", copy).returncode == 0
    engine = create_engine(_at(copy, driver="postgresql+psycopg"))
    with engine.connect() as c:
        assert c.execute(text("SELECT name FROM work_pool WHERE name = :n"), {"n": POOL}).scalar() == POOL
    engine.dispose()
