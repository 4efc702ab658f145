"""The hash chain's checks: the whole chain (``audit verify``, ``ledger show``,
``Ledger.checkpoint``), and what ``reserve`` checks before it admits a release, in time
that does not grow with the ledger: the rows written since the last verified checkpoint,
the checkpoint row itself (a forger who edits a row and recomputes every hash after it
changes that row's hash), and each row the reservation's decision reads (its own hash and
its successor's link).
"""

from __future__ import annotations

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from dprelease.ledger.database import CHECKPOINT, ENTRIES, GENESIS, HEAD, Txn, raw_rows, row_hash

__all__ = ["chain_problems", "read_rows_problems", "set_checkpoint", "tail_problems"]


def tail_problems(t: Txn) -> tuple[list[str], int]:
    """The checkpoint row still has the hash verified earlier, and every row after it
    matches its hash and links to the one before: (problems, the checkpoint's seq)."""
    conn = t.conn
    cp = conn.execute(select(CHECKPOINT.c.seq, CHECKPOINT.c.hash).where(CHECKPOINT.c.id == 1)).first()
    start = (0, GENESIS) if cp is None else (cp.seq, cp.hash)
    problems: list[str] = []
    tail = raw_rows(conn, ENTRIES.c.seq >= max(start[0], 1))
    prev = GENESIS
    if start[0] > 0:
        if not tail or tail[0]["seq"] != start[0] or tail[0]["hash"] != start[1]:
            problems.append(f"ledger row {start[0]} no longer has the hash verified earlier (rows rewritten)")
        prev = start[1]
        tail = tail[1:]
    for i, r in enumerate(tail, start=start[0] + 1):
        if r["seq"] != i:
            problems.append(f"ledger row {i} is missing")
            break
        if r["prev_hash"] != prev or row_hash(r) != r["hash"]:
            problems.append(f"ledger row {i} does not match its hash or the row before it (edited)")
        prev = r["hash"]
    if (t.seq, t.head) != (start[0] + len(tail), prev):
        problems.append("ledger head does not match the last row (rows removed or added at the end)")
    return problems, start[0]


def read_rows_problems(t: Txn, seqs: list[int], upto: int) -> list[str]:
    """The rows a decision read, up to the checkpoint (later ones ``_tail_problems``
    checks): each matches its hash, and its successor links to that hash."""
    seqs = sorted({s for s in seqs if s <= upto})
    if not seqs:
        return []
    rows = raw_rows(t.conn, ENTRIES.c.seq.in_(seqs))
    after = {
        r.seq: r.prev_hash
        for r in t.conn.execute(
            select(ENTRIES.c.seq, ENTRIES.c.prev_hash).where(ENTRIES.c.seq.in_([s + 1 for s in seqs]))
        )
    }
    return [
        f"ledger row {r['seq']} does not match its hash (edited)"
        for r in rows
        if row_hash(r) != r["hash"]
        or after.get(r["seq"] + 1, r["hash"] if r["seq"] == t.seq else None) != r["hash"]
    ] + [f"ledger row {s} is missing" for s in sorted(set(seqs) - {r["seq"] for r in rows})]


def chain_problems(conn: Connection) -> list[str]:
    """Every row from the genesis, and the head (``Ledger.verify_chain``, ``Ledger.checkpoint``)."""
    problems, prev = [], GENESIS
    rows = raw_rows(conn)
    head = conn.execute(select(HEAD.c.seq, HEAD.c.hash)).one()
    for i, r in enumerate(rows, start=1):
        if r["seq"] != i:
            problems.append(f"ledger row {i} is missing (found seq {r['seq']} in its place)")
        if r["prev_hash"] != prev:
            problems.append(f"ledger row {r['seq']}: prev_hash does not match the row before it")
        if row_hash(r) != r["hash"]:
            problems.append(f"ledger row {r['seq']}: its hash does not match its contents (edited)")
        prev = r["hash"]
    if (head.seq, head.hash) != (len(rows), prev):
        problems.append("ledger head does not match the last row (rows removed or added at the end)")
    return problems


def set_checkpoint(t: Txn) -> None:
    """The chain up to the head is verified: remember where (inside the same transaction)."""
    if t.conn.execute(select(CHECKPOINT.c.id)).first() is None:
        t.conn.execute(insert(CHECKPOINT).values(id=1, seq=t.seq, hash=t.head))
    else:
        t.conn.execute(update(CHECKPOINT).where(CHECKPOINT.c.id == 1).values(seq=t.seq, hash=t.head))
