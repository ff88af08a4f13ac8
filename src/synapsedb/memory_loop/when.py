"""Valid time: resolving "last week" said on 2025-10-24 to a date.

The LLM is asked for an ISO date already resolved against the message time; what it returns
(and, with no date from it, the memory's own words) goes through :func:`resolve`, which
understands ISO dates and the common relative phrases, always relative to the time the turn
was said, never to now. Anything it cannot read resolves to ``None`` (no valid time claimed).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, timedelta

__all__ = ["resolve", "to_datetime"]

_NUM = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}
_WEEKDAYS = [d.lower() for d in calendar.day_name]
_MONTHS = [m.lower() for m in calendar.month_name if m]
# the text is lower-cased before matching: "T" and "Z" of an ISO datetime are matched as "t", "z"
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})(?:[t ][0-9:.]+(?:z|[+-]\d{2}:?\d{2})?)?\b")
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)\s+"
    r"(day|week|month|year)s?\s+ago\b"
)
_IN = re.compile(
    r"\bin\s+(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)\s+"
    r"(day|week|month|year)s?\b"
)
_REL = re.compile(r"\b(last|next|this)\s+(week|month|year|" + "|".join(_WEEKDAYS) + r")\b")
_ON_DAY = re.compile(r"\b(?:on\s+)?(" + "|".join(_WEEKDAYS) + r")\b")
_MONTH = re.compile(r"\b(in\s+|since\s+)?(" + "|".join(_MONTHS) + r")(?:\s+(\d{4}))?\b")
_DAY_NUMBER = re.compile(r"\s+\d")


def _months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    year, month = d.year + y, m + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def _shift(ref: date, n: int, unit: str) -> date:
    if unit == "day":
        return ref + timedelta(days=n)
    if unit == "week":
        return ref + timedelta(weeks=n)
    if unit == "month":
        return _months(ref, n)
    return _months(ref, 12 * n)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUM[word]


def resolve(text: str | None, said_at: datetime) -> date | None:
    """The date ``text`` names, read relative to ``said_at`` (a timezone-aware datetime).

    Understands ISO dates, today/yesterday/tomorrow, "N days/weeks/months/years ago", "in N
    ...", "last/next/this week/month/year/<weekday>" ("this <weekday>": that day of the
    Monday-to-Sunday week of ``said_at``), a bare weekday (the most recent one before
    ``said_at``) and a month name, with or without a year (the most recent such month not
    after ``said_at``; "may" only as "in/since May", "May 2025" or "May 5", not the verb).
    Returns ``None`` when it finds none of these, or when the date it names is outside the
    calendar (years 1 to 9999: "in 5000000000 years", "8000 years ago", "January 0000").
    """
    try:
        return _resolve(text, said_at)
    except (ValueError, OverflowError):  # date() or timedelta beyond the calendar
        return None


def _resolve(text: str | None, said_at: datetime) -> date | None:
    if not text:
        return None
    s = text.lower()
    ref = said_at.astimezone(UTC).date()
    m = _ISO.search(s)
    if m:
        return date(int(m[1]), int(m[2]), int(m[3]))  # a bad date: None (resolve)
    for word, days in (
        ("day before yesterday", -2),
        ("yesterday", -1),
        ("today", 0),
        ("tonight", 0),
        ("this morning", 0),
        ("day after tomorrow", 2),
        ("tomorrow", 1),
    ):
        if word in s:
            return ref + timedelta(days=days)
    m = _AGO.search(s)
    if m:
        return _shift(ref, -_count(m[1]), m[2])
    m = _IN.search(s)
    if m:
        return _shift(ref, _count(m[1]), m[2])
    m = _REL.search(s)
    if m:
        which, unit = m[1], m[2]
        sign = {"last": -1, "next": 1, "this": 0}[which]
        if unit in ("week", "month", "year"):
            return _shift(ref, sign, unit)
        target = _WEEKDAYS.index(unit)
        back = (ref.weekday() - target) % 7 or 7
        if which == "last":
            return ref - timedelta(days=back)
        if which == "next":
            return ref + timedelta(days=(target - ref.weekday()) % 7 or 7)
        return ref + timedelta(days=target - ref.weekday())  # this: that day of this week
    for m in _MONTH.finditer(s):
        if m[2] == "may" and not (m[1] or m[3] or _DAY_NUMBER.match(s, m.end())):
            continue  # the verb ("the user may move"), not the month
        month = _MONTHS.index(m[2]) + 1
        if m[3]:
            return date(int(m[3]), month, 1)
        year = ref.year if month <= ref.month else ref.year - 1
        return date(year, month, 1)
    m = _ON_DAY.search(s)
    if m:
        back = (ref.weekday() - _WEEKDAYS.index(m[1])) % 7 or 7
        return ref - timedelta(days=back)
    return None


def to_datetime(d: date | None) -> datetime | None:
    """Midnight UTC of ``d`` (valid times are days: what a conversation can say)."""
    return None if d is None else datetime(d.year, d.month, d.day, tzinfo=UTC)
