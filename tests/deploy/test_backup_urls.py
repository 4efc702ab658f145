"""The backup command never prints a database password, even of a URL it cannot read."""

import pytest

from deploy.backup import BackupError, _url


def test_a_malformed_url_is_refused_without_its_password():
    with pytest.raises(BackupError) as refused:
        _url("postgresql+psycopg://steward:PW-MARKER-7f3a@db.example:notaport/ledger")
    assert "PW-MARKER-7f3a" not in str(refused.value) and "not a database URL" in str(refused.value)
