"""Budget periods (``mechanisms.periods``): ISO-8601 lengths of one unit cut UTC time into
calendar-aligned windows; the boundary instant belongs to the next window."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from dprelease.mechanisms.periods import Period


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(
    ("length", "when", "label", "start", "end"),
    [
        ("P1M", "2026-11-30T23:59:59+00:00", "2026-11", "2026-11-01", "2026-12-01"),
        ("P1M", "2026-12-01T00:00:00+00:00", "2026-12", "2026-12-01", "2027-01-01"),
        ("P1M", "2028-02-29T12:00:00+00:00", "2028-02", "2028-02-01", "2028-03-01"),
        ("P3M", "2026-11-15T00:00:00+00:00", "2026-10-01/P3M", "2026-10-01", "2027-01-01"),
        ("P1Y", "2026-12-31T23:59:59+00:00", "2026", "2026-01-01", "2027-01-01"),
        ("P1D", "2026-11-30T23:59:59+00:00", "2026-11-30", "2026-11-30", "2026-12-01"),
        ("P1W", "2026-11-26T10:00:00+00:00", "2026-W48", "2026-11-23", "2026-11-30"),  # Monday to Monday
        ("P7D", "2026-11-26T10:00:00+00:00", "2026-11-26/P7D", "2026-11-26", "2026-12-03"),
    ],
)
def test_windows_are_utc_calendar_periods(length, when, label, start, end):
    period = Period.parse(length)
    window = period.window(at(when))
    assert window == (at(f"{start}T00:00:00+00:00"), at(f"{end}T00:00:00+00:00"))
    assert period.label(at(when)) == label and str(period) == length


def test_the_boundary_minute_splits_two_months():
    month = Period.parse("P1M")
    before, after = at("2026-11-30T23:59:00+00:00"), at("2026-12-01T00:00:00+00:00")
    assert month.window(before) != month.window(after)
    assert month.window(before)[1] == after  # the first period ends where the next starts


def test_a_local_time_counts_in_its_utc_period():
    paris = timezone(timedelta(hours=1))
    # 00:30 on 1 December in Paris is still November in UTC
    assert Period.parse("P1M").label(datetime(2026, 12, 1, 0, 30, tzinfo=paris)) == "2026-11"
    assert Period.parse("P1M").label(datetime(2026, 12, 1, 1, 0, tzinfo=paris)) == "2026-12"


@pytest.mark.parametrize("text", ["P1H", "PT1M", "P0M", "P1Y2M", "1M", "P-1D", "p1m", "P1.5M", ""])
def test_other_durations_are_refused_naming_the_forms(text):
    with pytest.raises(ValueError, match=r"length .* must be an ISO-8601 duration of one unit: PnD"):
        Period.parse(text)


def test_each_instant_lies_in_its_window():
    for length in ("P1D", "P2W", "P1M", "P5M", "P2Y"):
        period = Period.parse(length)
        t = datetime(1969, 6, 1, tzinfo=UTC)
        while t.year < 2031:
            start, end = period.window(t)
            assert start <= t < end and period.window(start) == (start, end)
            t += timedelta(days=37, hours=5)
