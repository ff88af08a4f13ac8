"""Valid time of extracted memories: dates and relative phrases resolved against the time the
turn was said (synapsedb.memory_loop.when), never against now."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from synapsedb.memory_loop.when import resolve, to_datetime

FRIDAY = datetime(2025, 10, 24, 15, 30, tzinfo=UTC)  # the example: said on 2025-10-24


def at(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-14", date(2025, 3, 14)),
        ("moved on 2024-12-01T09:30:00Z to Lisbon", date(2024, 12, 1)),
        ("since 2025-10-01 10:00:00+02:00", date(2025, 10, 1)),
        ("2025-10-17T00:00:00Z", date(2025, 10, 17)),  # what a model often answers
        ("2025-10-17T08:15:00", date(2025, 10, 17)),
        ("yesterday", date(2025, 10, 23)),
        ("the day before yesterday", date(2025, 10, 22)),
        ("today", date(2025, 10, 24)),
        ("tomorrow", date(2025, 10, 25)),
        ("the day after tomorrow", date(2025, 10, 26)),
        ("last week", date(2025, 10, 17)),
        ("next week", date(2025, 10, 31)),
        ("3 days ago", date(2025, 10, 21)),
        ("a day ago", date(2025, 10, 23)),
        ("two weeks ago", date(2025, 10, 10)),
        ("a couple of days ago", date(2025, 10, 22)),
        ("a few weeks ago", date(2025, 10, 3)),
        ("6 months ago", date(2025, 4, 24)),
        ("a year ago", date(2024, 10, 24)),
        ("in 2 weeks", date(2025, 11, 7)),
        ("in a month", date(2025, 11, 24)),
        ("last month", date(2025, 9, 24)),
        ("last monday", date(2025, 10, 20)),
        ("last friday", date(2025, 10, 17)),  # said on a Friday: the one before
        ("next monday", date(2025, 10, 27)),
        ("next friday", date(2025, 10, 31)),
        ("on Tuesday", date(2025, 10, 21)),
        ("in March", date(2025, 3, 1)),
        ("in October", date(2025, 10, 1)),  # the current month is not in the future
        ("in December", date(2024, 12, 1)),  # not after the day it was said
        ("March 2023", date(2023, 3, 1)),
        ("in december 2026", date(2026, 12, 1)),
    ],
)
def test_phrases_resolve_against_the_day_they_were_said(text: str, expected: date) -> None:
    assert resolve(text, FRIDAY) == expected


@pytest.mark.parametrize(
    "text",
    [None, "", "sometime", "whenever it suits", "2025-02-30", "2025-13-01", "the 1990s", "42"],
)
def test_what_names_no_date_resolves_to_none(text: str | None) -> None:
    assert resolve(text, FRIDAY) is None


@pytest.mark.parametrize(
    ("text", "said", "expected"),
    [
        ("a month ago", at(2025, 3, 31), date(2025, 2, 28)),
        ("one month ago", at(2024, 3, 31), date(2024, 2, 29)),  # leap year
        ("3 months ago", at(2025, 5, 31), date(2025, 2, 28)),
        ("a year ago", at(2024, 2, 29), date(2023, 2, 28)),
        ("in a month", at(2025, 1, 31), date(2025, 2, 28)),
        ("in 2 months", at(2025, 12, 31), date(2026, 2, 28)),
        ("last month", at(2025, 1, 15), date(2024, 12, 15)),
        ("next month", at(2025, 12, 31), date(2026, 1, 31)),
        ("yesterday", at(2025, 3, 1), date(2025, 2, 28)),
        ("tomorrow", at(2024, 12, 31), date(2025, 1, 1)),
        ("in January", at(2025, 1, 1), date(2025, 1, 1)),
        ("in February", at(2025, 1, 1), date(2024, 2, 1)),
    ],
)
def test_month_end_and_year_boundaries(text: str, said: datetime, expected: date) -> None:
    assert resolve(text, said) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The user may move to Berlin", None),  # the verb, not the month
        ("They may visit in March", date(2025, 3, 1)),
        ("in May", date(2025, 5, 1)),
        ("since May", date(2025, 5, 1)),
        ("May 2024", date(2024, 5, 1)),
        ("on May 5", date(2025, 5, 1)),
    ],
)
def test_may_is_a_month_only_where_it_names_one(text: str, expected: date | None) -> None:
    assert resolve(text, FRIDAY) == expected


@pytest.mark.parametrize(
    ("text", "said", "expected"),
    [
        ("this monday", at(2025, 10, 20), date(2025, 10, 20)),  # said on that Monday: today
        ("this friday", at(2025, 10, 20), date(2025, 10, 24)),  # later in the same week
        ("this monday", at(2025, 10, 24), date(2025, 10, 20)),  # earlier in the same week
        ("this sunday", at(2025, 10, 24), date(2025, 10, 26)),
        ("this week", at(2025, 10, 24), date(2025, 10, 24)),
    ],
)
def test_this_weekday_is_that_day_of_the_same_week(
    text: str, said: datetime, expected: date
) -> None:
    assert resolve(text, said) == expected


def test_the_reference_is_the_time_said_not_now() -> None:
    long_ago = datetime(2001, 6, 15, tzinfo=UTC)
    assert resolve("last week", long_ago) == date(2001, 6, 8)
    assert resolve("yesterday", long_ago) == date(2001, 6, 14)


def test_a_said_time_in_another_zone_counts_by_its_utc_day() -> None:
    # 01:00 on the 24th at +03:00 is 22:00 on the 23rd in UTC: valid times are UTC days
    said = datetime(2025, 10, 24, 1, 0, tzinfo=timezone(timedelta(hours=3)))
    assert resolve("yesterday", said) == date(2025, 10, 22)


def test_an_iso_date_wins_over_relative_words() -> None:
    assert resolve("yesterday, that is 2025-01-05", FRIDAY) == date(2025, 1, 5)


def test_to_datetime_is_midnight_utc() -> None:
    assert to_datetime(date(2025, 10, 17)) == datetime(2025, 10, 17, tzinfo=UTC)
    assert to_datetime(None) is None
