"""Issue 19, dates: whole units of a public resolution since the epoch, and back to ISO
text; the readers' conversion (text or a Parquet file's dates); the spec's bounds."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from dprelease.engines.tables import calendar_units
from dprelease.mechanisms.calendar import to_iso, to_units
from dprelease.mechanisms.schema import Continuous
from dprelease.spec.columns import DateSpec


@pytest.mark.parametrize(
    ("unit", "text", "units", "iso"),
    [
        (
            "day",
            ["1969-12-31T23:00", "1970-01-02", "2024-02-29"],
            [-1, 1, 19782],
            ["1969-12-31", "1970-01-02", "2024-02-29"],
        ),
        (
            "month",
            ["1969-12-31", "1970-01-20", "2024-02-29"],
            [-1, 0, 649],
            ["1969-12", "1970-01", "2024-02"],
        ),
        ("year", ["1969-12-31", "2024-07-01"], [-1, 54], ["1969", "2024"]),
        ("minute", ["2024-01-01T10:30:59"], [28_401_750], ["2024-01-01T10:30"]),
        ("second", ["2024-01-01T10:30:59"], [1_704_105_059], ["2024-01-01T10:30:59"]),
    ],
)
def test_units_floor_to_the_resolution_and_print_back(unit, text, units, iso):
    got = to_units(np.array(text, dtype="datetime64[s]"), unit)
    np.testing.assert_array_equal(got, units)
    assert list(to_iso(got, unit)) == iso


def test_the_readers_take_text_and_dates_and_keep_what_is_not_a_date():
    c = Continuous("d", -100.0, 30_000.0, True, calendar="day")
    text = pd.Series(["2024-01-02", None, "", "2024-01-02T05:00Z", "02/01/2024"])
    got = calendar_units(text, c)
    assert got.iloc[0] == got.iloc[3] == 19724 and pd.isna(got.iloc[1]) and pd.isna(got.iloc[2])
    assert got.iloc[4] == "02/01/2024"  # left as text for the suite's type rule
    dates = calendar_units(pd.Series([dt.date(2024, 1, 2), None]), c)
    assert dates.iloc[0] == 19724 and pd.isna(dates.iloc[1]) and dates.dtype == float


def test_date_bounds_and_resolutions_are_checked():
    d = DateSpec.model_validate({"type": "date", "bounds": [dt.date(1920, 1, 1), "2010-12-31"]})
    assert d.unit == "day" and d.unit_bounds() == (-18263.0, 14974.0)
    with pytest.raises(ValueError, match="resolution 'minute' must be one of"):
        DateSpec.model_validate(
            {"type": "date", "bounds": ["1920-01-01", "2010-12-31"], "resolution": "minute"}
        )
    with pytest.raises(ValueError, match="must be ordered"):
        DateSpec.model_validate({"type": "datetime", "bounds": ["2024-01-02T00:00", "2024-01-01T00:00"]})
    with pytest.raises(ValueError, match="without a time zone"):
        DateSpec.model_validate({"type": "datetime", "bounds": ["2024-01-01T00:00Z", "2024-02-01T00:00Z"]})
