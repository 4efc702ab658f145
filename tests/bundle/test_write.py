"""The bundle writer (``bundle.write``): CSV that round-trips awkward text, and write
failures (a full disk, no permission, a read-only or failing device) turned into a
``DPReleaseError`` naming the folder, the reason and what to do, with no partial file or
``public/`` left behind, and a failure record that cleans up after itself when even it
cannot be written. The same failures end to end are in tests/flows/test_hostile_release.py."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from dprelease.engines.tables import DataError
from dprelease.mechanisms.errors import DPReleaseError


def _staging(out: Path) -> Path:
    staging = out / ".staging-r-0000"
    (staging / "public").mkdir(parents=True)
    (staging / "internal").mkdir()
    (staging / "internal" / "validation_input.json").write_text("{}")
    return staging


def test_write_csv_round_trips_awkward_text(tmp_path):
    from dprelease.bundle.write import write_csv

    df = pd.DataFrame({"a,b": [1, 2], "c": pd.array(['x,"y"', "plain"], dtype="str")})
    write_csv(df, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == '"a,b",c'
    back = pd.read_csv(tmp_path / "t.csv", dtype={"c": str})
    assert back["a,b"].tolist() == [1, 2] and back["c"].tolist() == ['x,"y"', "plain"]


@pytest.mark.parametrize(
    ("code", "reason", "hint"),
    [
        (errno.ENOSPC, "no space left on device (ENOSPC)", "free space on that device or choose --out"),
        (errno.EACCES, "permission denied (EACCES)", "choose --out with a folder you can write to"),
        (errno.EROFS, "read-only file system (EROFS)", "choose --out on a writable one"),
        (errno.EIO, "input/output error (EIO)", "check the folder and its device, or choose another --out"),
    ],
    ids=["ENOSPC", "EACCES", "EROFS", "EIO"],
)
def test_write_errors_become_clear_messages(code, reason, hint, tmp_path, monkeypatch):
    """An OSError part way through write_bundle is a DPReleaseError naming the folder, the
    reason and what to do; the partial public/ is gone and nothing is at the destination."""
    import dprelease.bundle.write as bundle

    def fail_part_way(table, path):
        path.write_text("age,sex\n1,")  # a partial file, then the device gives up
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(bundle, "write_csv", fail_part_way)
    out = tmp_path / "out"
    staging = _staging(out)
    with pytest.raises(DPReleaseError) as err:
        document = {"outputs": {"synthetic.csv": {"format": "csv"}}}
        bundle.write_bundle_files(staging, out / "r", pd.DataFrame({"a": [1]}), document)
    message = str(err.value)
    assert message.startswith(
        f"writing the release bundle into '{out}' failed: {reason}; nothing was published"
    )
    assert hint in message and "stays spent" in message
    assert not (out / "r").exists() and not (staging / "public").exists()
    assert (staging / "internal" / "validation_input.json").is_file()  # for the failure record


def test_write_csv_removes_its_partial_file(tmp_path, monkeypatch):
    import dprelease.bundle.write as bundle

    def full(table, sink, options):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(bundle.pa_csv, "write_csv", full)
    with pytest.raises(OSError) as err:
        bundle.write_csv(pd.DataFrame({"a": [1, 2]}), tmp_path / "s.csv")  # the header is written first
    assert err.value.errno == errno.ENOSPC and not (tmp_path / "s.csv").exists()


def test_failure_record_on_a_full_disk(tmp_path, monkeypatch):
    """If even the failure record cannot be written, it is removed, the staging folder is
    removed, and the message says why and what the run had failed with."""
    import dprelease.bundle.write as bundle

    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(bundle, "write_json", full)
    out = tmp_path / "out"
    staging = _staging(out)
    original = DPReleaseError("writing the release bundle into 'x' failed: no space left on device (ENOSPC)")
    with pytest.raises(DPReleaseError) as err:
        bundle.write_failure_record(out, "r", "write_bundle", original, staging)
    message = str(err.value)
    assert message.startswith(f"writing the failure record into '{out / 'failures'}' failed: no space left")
    assert "the run had failed at stage 'write_bundle': writing the release bundle" in message
    assert not staging.exists() and list((out / "failures").iterdir()) == []


def test_failure_record_moves_the_internal_reports(tmp_path):
    from dprelease.bundle.write import write_failure_record

    out = tmp_path / "out"
    staging = _staging(out)
    record = write_failure_record(out, "r", "validate_input", DataError("column 'x': rule"), staging)
    assert (record / "internal" / "validation_input.json").is_file() and not staging.exists()
    assert json.loads((record / "failure.json").read_text())["message"] == "column 'x': rule"


# ---------------------------------------------------------------- issue 33: tokens that are plain numbers


def _layout():
    from dprelease.bundle.published import Layout
    from dprelease.mechanisms.schema import Continuous, Nominal, Ordinal, Schema

    schema = Schema(
        (
            Nominal("flag", ("0", "1")),
            Ordinal("grade", ("1", "2.5", "10")),
            Nominal("city", ("Paris, TX", "Lyon")),
            Nominal("code", ("01", "1")),  # "01" is text: it would print as 1
            Nominal("choice", ("u", "v", "none")),  # a one-hot group, published as indicators
            Continuous("x", 0.0, 1.0),
        )
    )
    return Layout(schema, ("flag", "grade", "city", "code", "u", "v", "x"), one_hot={"choice": ("u", "v")})


def _synthetic() -> pd.DataFrame:
    text = {"dtype": "str"}
    return pd.DataFrame(
        {
            "flag": pd.array(["0", "1", "1"], **text),
            "grade": pd.array(["10", "2.5", "1"], **text),
            "city": pd.array(["Paris, TX", "Lyon", "Lyon"], **text),
            "code": pd.array(["01", "1", "01"], **text),
            "choice": pd.array(["u", "none", "v"], **text),
            "x": [0.5, 0.25, 1.0],
        }
    )


EXPECTED = [
    "flag,grade,city,code,u,v,x",
    '0,10,"Paris, TX","01",1,0,0.5',
    '1,2.5,"Lyon","1",0,0,0.25',
    '1,1,"Lyon","01",0,1,1',
]


def test_tokens_that_are_plain_numbers_are_written_bare_like_indicators(tmp_path):
    """Nominal 0/1 and ordinal 1/2.5/10 come out as bare numbers, as one-hot indicators
    and numbers do; text that needs quotes (a comma) is quoted, and so is text that only
    looks like a number ("01", which a number would print as 1)."""
    from dprelease.bundle.published import publishable
    from dprelease.bundle.write import write_csv

    write_csv(publishable(_synthetic(), _layout()), tmp_path / "s.csv")
    assert (tmp_path / "s.csv").read_text().splitlines() == EXPECTED


def test_the_streaming_writer_writes_the_same_text(tmp_path):
    import pyarrow.parquet as pq

    from dprelease.bundle.stream import write_synthetic_chunks

    (tmp_path / "public").mkdir()
    (tmp_path / "internal").mkdir()
    layout = _layout()
    table = _synthetic()
    chunk = iter([table.iloc[:2], table.iloc[2:]])
    write_synthetic_chunks(
        lambda k: next(chunk).reset_index(drop=True),
        lambda df: [],
        layout.schema,
        3,
        2,
        ["csv", "parquet"],
        1,
        tmp_path,
        layout=layout,
    )
    assert (tmp_path / "public" / "synthetic.csv").read_text().splitlines() == EXPECTED
    types = pq.read_schema(tmp_path / "public" / "synthetic.parquet").types
    assert [str(t) for t in types[:4]] == ["int64", "double", "string", "string"]
