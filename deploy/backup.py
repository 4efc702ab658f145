"""Back up the budget ledger and the Prefect database, keep the newest N, and restore one.

    python deploy/backup.py backup --dest /var/backups/dprelease --keep 30
    python deploy/backup.py list --dest /var/backups/dprelease
    python deploy/backup.py restore /var/backups/dprelease/ledger/ledger-20261201T020000Z.json \\
        --to sqlite:////srv/releases/ledger.db

What is backed up (each defaults to the environment the services use):

* the ledger (``--ledger``, default ``DPRELEASE_LEDGER``): SQLite through SQLite's online
  backup API (consistent while releases write), PostgreSQL with ``pg_dump -Fc`` inside the
  snapshot in which the chain was read, so the backup's recorded chain head is exactly the
  dump's. The chain is verified (``ledger.chain``) and its head (row, sha256) written in the
  backup's manifest: compare it with the head you anchored before restoring;
* the Prefect database (``--prefect-db``, default ``PREFECT_SERVER_DATABASE_CONNECTION_URL``,
  else Prefect's SQLite file ``$PREFECT_HOME/prefect.db``): flow runs, schedules, automations,
  blocks (a Secret block's value too: keep the backups as secret as the database).

Each backup is ``DEST/<kind>/<kind>-<UTC time>.{sqlite,dump}`` and its manifest ``.json``
(sha256, size, the source's URL rebuilt with no secret, ledger head and chain check), written last, so a
backup without a manifest is incomplete and never counted. ``--keep N`` deletes all but the
newest N complete backups of a kind, and only after this run's backup of that kind succeeded
with an intact chain. Files are created mode 0600 in 0700 folders.

``restore`` checks the backup's sha256, then: SQLite, copies it into place (an existing file
only with ``--replace``, and it is kept beside as ``*.before-restore-<time>``); PostgreSQL,
``pg_restore --single-transaction`` into an existing *empty* database (run it as a superuser
or the tables' owner, then run deploy/postgres/setup.sql again to re-apply the grants). A
restored ledger is verified: intact chain and the manifest's head, else exit 1.

Passwords never go on a command line: ``DPRELEASE_LEDGER_PASSWORD`` for the ledger (as the
release does), ``PREFECT_SERVER_DATABASE_PASSWORD`` or the URL's for the Prefect database,
or a libpq password file (``PGPASSFILE``, ``~/.pgpass``); pg_dump and pg_restore receive
them in their environment. Exit codes: 0 done; 1 a backup or check failed; 2 bad usage.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import URL, make_url

from dprelease.ledger.chain import chain_problems
from dprelease.ledger.database import HEAD, open_engine
from dprelease.ledger.errors import LedgerError
from dprelease.ledger.url import ALLOWED_KEYS, PASSWORD_ENV, shown_url

__all__ = ["backup", "main", "prune", "restore"]

KINDS = ("ledger", "prefect")


class BackupError(Exception):
    """A backup or restore could not be done; the message says why."""


def _now() -> datetime:
    return datetime.now(UTC)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _url(url: str) -> URL:
    try:
        return make_url(url)
    except Exception:
        raise BackupError(
            "a URL given is not a database URL (sqlite:///PATH or postgresql://USER@HOST/DB); it is not "
            "shown: it may hold a password"
        ) from None


def _prefect_password(u: URL) -> str | None:
    """The Prefect URL's password: written in it, or Prefect's ``${PREFECT_SERVER_DATABASE_PASSWORD}``."""
    pw = u.password
    if pw is not None and "DATABASE_PASSWORD}" in str(pw):
        return os.environ.get("PREFECT_SERVER_DATABASE_PASSWORD") or os.environ.get(
            "PREFECT_API_DATABASE_PASSWORD"
        )
    return None if pw is None else str(pw)


def _libpq(u: URL, password: str | None) -> tuple[str, dict[str, str]]:
    """A libpq connection string for pg_dump/pg_restore (on their command line: ``ps``
    shows it), rebuilt from ``u``'s user, host, port, database and the query keys libpq takes
    that hold no secret (``ALLOWED_KEYS``), and the environment that carries the password."""
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = password
    kept = {k: v for k, v in u.query.items() if k in ALLOWED_KEYS}
    rebuilt = URL.create(
        "postgresql", username=u.username, host=u.host, port=u.port, database=u.database, query=kept
    )
    return rebuilt.render_as_string(hide_password=False), env


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} is not installed (Debian: apt-get install postgresql-client)")
    return found


def _run(cmd: list[str], env: dict[str, str]) -> None:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise BackupError(f"{Path(cmd[0]).name} failed (exit {out.returncode}): {out.stderr.strip()[-800:]}")


def _sqlite_copy(source: Path, dest: Path) -> None:
    """SQLite's online backup: a consistent copy while other connections write."""
    # opened read-write although only read: SQLite's mode=ro cannot open a WAL database (Prefect's)
    # whose -shm file it may not create
    src = sqlite3.connect(source)
    dst = sqlite3.connect(dest)
    try:
        src.backup(dst)
        ok = dst.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        src.close()
        dst.close()
    if ok != "ok":
        raise BackupError(f"the copy of {source} fails SQLite's integrity check: {ok}")


def _sqlalchemy(url: str) -> str:
    """``url`` with the driver the ledger uses (``postgresql://`` means psycopg2 to SQLAlchemy)."""
    u = _url(url)
    if u.get_backend_name() == "postgresql":
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def _ledger_facts(url: str, password: str | None = None) -> dict:
    """The chain head and the chain's problems of the ledger at ``url``."""
    engine = open_engine(_sqlalchemy(url), create=False, password=password)
    try:
        with engine.connect() as conn:
            seq, head = conn.execute(select(HEAD.c.seq, HEAD.c.hash)).one()
            problems = chain_problems(conn)
    finally:
        engine.dispose()
    return {"head": {"seq": seq, "hash": head}, "chain_problems": problems}


def _pg_ledger_dump(url: str, dest: Path) -> dict:
    """``pg_dump -Fc`` of the ledger inside the snapshot in which its chain was read."""
    password = None if _url(url).password is not None else os.environ.get(PASSWORD_ENV) or None
    engine = open_engine(_sqlalchemy(url), create=False, password=password)
    u = engine.url
    conninfo, env = _libpq(u, None if u.password is None else str(u.password))
    try:
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
            snapshot = conn.execute(text("SELECT pg_export_snapshot()")).scalar_one()
            seq, head = conn.execute(select(HEAD.c.seq, HEAD.c.hash)).one()
            problems = chain_problems(conn)
            _run(
                [_pg_tool("pg_dump"), "-Fc", f"--snapshot={snapshot}", "-f", str(dest), "--dbname", conninfo],
                env,
            )
    finally:
        engine.dispose()
    return {"head": {"seq": seq, "hash": head}, "chain_problems": problems}


@contextmanager
def _locked(dest: Path) -> Iterator[None]:
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    with (dest / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(f"another backup into {dest} is running") from None
        yield


def _new_name(folder: Path, kind: str, ext: str) -> Path:
    stamp = _now().strftime("%Y%m%dT%H%M%SZ")
    path, n = folder / f"{kind}-{stamp}{ext}", 1
    while path.exists() or path.with_suffix(".json").exists():
        n += 1
        path = folder / f"{kind}-{stamp}-{n}{ext}"
    return path


def backup(kind: str, url: str, dest: Path) -> dict:
    """One backup of ``kind`` (``ledger`` or ``prefect``) of the database at ``url`` into
    ``dest/<kind>/``; returns its manifest (also written beside it)."""
    u = _url(url)
    folder = dest / kind
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    started = _now()
    backend = u.get_backend_name()
    path = _new_name(folder, kind, ".sqlite" if backend == "sqlite" else ".dump")
    partial = path.with_name(path.name + ".partial")
    manifest: dict = {"kind": kind, "source": shown_url(url), "started": started.isoformat()}
    try:
        if backend == "sqlite":
            source = Path(u.database or "")
            if not source.is_file():
                raise BackupError(f"there is no database file at {source}")
            _sqlite_copy(source, partial)
            manifest["format"] = "sqlite"
            if kind == "ledger":
                manifest["ledger"] = _ledger_facts(f"sqlite:///{partial}")
        elif backend == "postgresql":
            if kind == "ledger":
                manifest["ledger"] = _pg_ledger_dump(url, partial)
            else:
                conninfo, env = _libpq(u, _prefect_password(u))
                _run([_pg_tool("pg_dump"), "-Fc", "-f", str(partial), "--dbname", conninfo], env)
            manifest["format"] = "pg_dump-custom"
        else:
            raise BackupError(f"{shown_url(url)}: only sqlite and postgresql databases are backed up")
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    manifest.update(
        file=path.name, bytes=path.stat().st_size, sha256=_sha256(path), finished=_now().isoformat()
    )
    tmp = path.with_suffix(".json.partial")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, path.with_suffix(".json"))
    return manifest


def backups(dest: Path, kind: str) -> list[tuple[Path, dict]]:
    """The complete backups of ``kind`` (a manifest and its file), oldest first."""
    found = []
    for m in sorted((dest / kind).glob(f"{kind}-*.json")):
        try:
            manifest = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        if (m.parent / manifest.get("file", "")).is_file():
            found.append((m, manifest))
    return sorted(found, key=lambda pm: pm[1].get("started", ""))


def prune(dest: Path, kind: str, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` complete backups of ``kind``; returns the deleted names."""
    if keep < 1:
        raise BackupError("--keep must be at least 1")
    gone = []
    for m, manifest in backups(dest, kind)[:-keep]:
        (m.parent / manifest["file"]).unlink(missing_ok=True)
        m.unlink(missing_ok=True)
        gone.append(manifest["file"])
    return gone


def _default_prefect_db() -> str | None:
    url = os.environ.get("PREFECT_SERVER_DATABASE_CONNECTION_URL") or os.environ.get(
        "PREFECT_API_DATABASE_CONNECTION_URL"
    )
    if url:
        return url
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect")
    return f"sqlite:///{home / 'prefect.db'}" if (home / "prefect.db").is_file() else None


def _is_empty_pg(u: URL, password: str | None) -> bool:
    from sqlalchemy import create_engine

    engine = create_engine(u.set(drivername="postgresql+psycopg", password=password))
    try:
        return not inspect(engine).get_table_names()
    finally:
        engine.dispose()


def restore(manifest_path: Path, to: str, replace: bool = False) -> dict:
    """Restore the backup described by ``manifest_path`` into the database at ``to``;
    returns what a restored ledger's check found."""
    manifest = json.loads(manifest_path.read_text())
    data = manifest_path.parent / manifest["file"]
    if not data.is_file() or _sha256(data) != manifest["sha256"]:
        raise BackupError(f"{data} is missing or does not match its manifest's sha256: choose another backup")
    u = _url(to)
    kind = manifest["kind"]
    if u.get_backend_name() == "sqlite":
        if manifest["format"] != "sqlite":
            raise BackupError(f"{data.name} is a {manifest['format']} backup: restore it into PostgreSQL")
        target = Path(u.database or "")
        if target.exists() and not replace:
            raise BackupError(
                f"{target} exists; pass --replace (it is kept beside as *.before-restore-<time>)"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".restoring")
        partial.unlink(missing_ok=True)
        _sqlite_copy(data, partial)
        if target.exists():
            os.replace(target, target.with_name(f"{target.name}.before-restore-{_now():%Y%m%dT%H%M%SZ}"))
        os.replace(partial, target)
    elif u.get_backend_name() == "postgresql":
        if manifest["format"] != "pg_dump-custom":
            raise BackupError(f"{data.name} is a {manifest['format']} backup: restore it into SQLite")
        password = str(u.password) if u.password is not None else None
        if kind == "ledger" and password is None:
            password = os.environ.get(PASSWORD_ENV) or None
        if not _is_empty_pg(u, password):
            raise BackupError(
                f"{shown_url(to)} is not empty: restore into a new database (createdb -O OWNER NAME), "
                "then point the services at it"
            )
        conninfo, env = _libpq(u, password)
        _run(
            [_pg_tool("pg_restore"), "--exit-on-error", "--single-transaction", "-d", conninfo, str(data)],
            env,
        )
    else:
        raise BackupError(f"{shown_url(to)}: only sqlite and postgresql databases are restored")
    if kind != "ledger":
        return {}
    pw = None if u.password is not None else os.environ.get(PASSWORD_ENV) or None
    found = _ledger_facts(to, pw)
    found["head_matches_backup"] = found["head"] == manifest["ledger"]["head"]
    return found


def _cmd_backup(args: argparse.Namespace) -> int:
    sources = {"ledger": args.ledger or os.environ.get("DPRELEASE_LEDGER"), "prefect": args.prefect_db}
    if sources["prefect"] is None:
        sources["prefect"] = _default_prefect_db()
    if sources["prefect"] == "none":
        sources["prefect"] = None
    if not any(sources.values()):
        print("backup: nothing to back up: pass --ledger and/or --prefect-db", file=sys.stderr)
        return 2
    failed = False
    with _locked(args.dest):
        for kind in KINDS:
            url = sources[kind]
            if url is None:
                print(f"skip  {kind}: no database named (--{'ledger' if kind == 'ledger' else 'prefect-db'})")
                continue
            try:
                m = backup(kind, url, args.dest)
            except (BackupError, LedgerError, OSError, sqlite3.Error) as e:
                print(f"FAIL  {kind}: {shown_url(url)}: {e}")
                failed = True
                continue
            problems = m.get("ledger", {}).get("chain_problems") or []
            head = m.get("ledger", {}).get("head")
            where = f" (chain head: row {head['seq']}, sha256 {head['hash']})" if head else ""
            print(f"ok    {kind}: {m['file']}, {m['bytes']} bytes{where}")
            if problems:
                print(
                    f"FAIL  {kind}: the backed-up chain is broken ({'; '.join(problems[:3])}); nothing pruned"
                )
                failed = True
                continue
            for name in prune(args.dest, kind, args.keep):
                print(f"      {kind}: removed {name} (keeping the newest {args.keep})")
    return 1 if failed else 0


def _cmd_list(args: argparse.Namespace) -> int:
    for kind in KINDS:
        for _, m in backups(args.dest, kind):
            head = m.get("ledger", {}).get("head")
            extra = f"  head row {head['seq']} {head['hash']}" if head else ""
            print(f"{kind:8} {m['file']:40} {m['bytes']:>12}  {m['source']}{extra}")
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    try:
        found = restore(args.manifest, args.to, args.replace)
    except (BackupError, LedgerError, OSError, sqlite3.Error, KeyError, ValueError) as e:
        print(f"FAIL  restore: {e}")
        return 1
    print(f"ok    restored {args.manifest.name} into {shown_url(args.to)}")
    if not found:
        return 0
    head = found["head"]
    print(f"      chain head: row {head['seq']}, sha256 {head['hash']}")
    if found["chain_problems"]:
        print(f"FAIL  the restored ledger's chain is broken: {'; '.join(found['chain_problems'][:3])}")
        return 1
    if not found["head_matches_backup"]:
        print("FAIL  the restored ledger's head differs from the backup's manifest")
        return 1
    print("ok    chain intact and equal to the backup's head; compare it with the head you anchored")
    if _url(args.to).get_backend_name() == "postgresql":
        print("      now run deploy/postgres/setup.sql again to re-apply the database's grants")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("backup", help="back up the ledger and the Prefect database, keep the newest N")
    b.add_argument("--dest", type=Path, required=True, help="backup folder")
    b.add_argument("--ledger", help="ledger URL (default DPRELEASE_LEDGER)")
    b.add_argument(
        "--prefect-db",
        help="Prefect database URL (default PREFECT_SERVER_DATABASE_CONNECTION_URL, else "
        "$PREFECT_HOME/prefect.db; 'none' skips it)",
    )
    b.add_argument("--keep", type=int, default=30, help="complete backups kept per kind (default 30)")
    b.set_defaults(run=_cmd_backup)
    ls = sub.add_parser("list", help="list the complete backups, oldest first")
    ls.add_argument("--dest", type=Path, required=True)
    ls.set_defaults(run=_cmd_list)
    r = sub.add_parser("restore", help="restore one backup (its .json manifest) into a database")
    r.add_argument("manifest", type=Path, help="the backup's manifest: DEST/<kind>/<kind>-<time>.json")
    r.add_argument("--to", required=True, help="target URL: sqlite:///PATH, or an empty PostgreSQL database")
    r.add_argument("--replace", action="store_true", help="SQLite: replace an existing file (kept beside)")
    r.set_defaults(run=_cmd_restore)
    args = parser.parse_args(argv)
    os.umask(0o077)
    try:
        return args.run(args)
    except BackupError as e:
        print(f"FAIL  {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
