"""Temporal grounding of a question against the dates of memories: pure functions.

Two signals, both cheap (regular expressions, no model):

* **The question names a date or a period** ("on 9 November, 2022", "October 6, 2022", "in July
  2022", "between August 11 and August 15 2023", "the week before 16 November 2023"):
  :func:`question_window` turns it into a window of days, and a memory whose day
  (:func:`memory_day`) falls in it matches. A day-level date opens a window from a few days before
  to a week after it (what happened "last week" is told a few days later); a month, the month and
  the week after it; a month without a year matches that month in any year.
* **The question asks when** ("When did ...", "How long ago ...", "What year ..."):
  :func:`asks_when`; a memory that places something in time with a relative expression
  ("yesterday", "last weekend", "two weeks ago", "next month") is likelier to be the answer
  (:func:`mentions_time`): the answer to "when did X go camping" is the turn that says "we went
  camping last week", dated by its message.

A memory's day is the date its text opens with (chat logs imported as memories carry it: "On 8
May 2023, Caroline said: ...") or else the day it was written (``created_at``).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

MONTHS = {m: i for i, m in enumerate(
    ("january february march april may june july august september october november december").split(), 1)}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
# "9 November, 2022", "8th December, 2023", "14September, 2022"
_DMY = re.compile(rf"\b{_DAY}\s*{_MONTH},?\s+{_YEAR}\b", re.I)
# "October 6, 2022", "December 1,2023", "August 11 and August 15 2023" (the year of the last)
_MDY = re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,\s*|\s+){_YEAR}\b", re.I)
_MD_AND = re.compile(rf"\b{_MONTH}\s+{_DAY}\s+(?:and|to|-)\s+{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)
_MY = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)
_M = re.compile(rf"\b(?:in|during|of|early|late|beginning of|end of|middle of)\s+(?:the\s+)?{_MONTH}\b", re.I)
_OPENING = re.compile(rf"^\s*on\s+{_DAY}\s+{_MONTH},?\s+{_YEAR}\b", re.I)
_WHEN = re.compile(r"^\s*(when\b|how long ago\b|what (year|month|date|day)\b|which (year|month|day)\b|"
                   r"in which (year|month)\b|how long has\b|since when\b)", re.I)
_RELATIVE = re.compile(
    r"\b(yesterday|tomorrow|last (night|week|weekend|month|year|summer|winter|spring|fall|autumn|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|(this|next) (week|weekend|month|year|summer)|"
    r"(past|other) (week|weekend|month|day)|(a|one|two|three|four|five|few|couple( of)?|several|\d+) "
    r"(days?|weeks?|months?|years?) ago|ago|recently|just (got|finished|started|went|had))\b", re.I)

BEFORE_DAYS = 3  # a day-level window opens this many days before the date
AFTER_DAYS = 7  # and closes this many after it


def _day(y: str, m: str, d: str) -> date | None:
    try:
        return date(int(y), MONTHS[m.lower()], int(d))
    except ValueError:
        return None


def memory_day(text: str, created_at: str | None = None) -> date | None:
    """The day a memory speaks from: the date its text opens with ("On 8 May 2023, ..."), else
    the ISO ``created_at``'s day, else None."""
    if m := _OPENING.match(text):
        return _day(m.group(3), m.group(2), m.group(1))
    if created_at:
        try:
            return datetime.fromisoformat(created_at.replace("Z", "+00:00")).date()
        except ValueError:
            return None
    return None


Window = tuple[date, date] | tuple[int, None]  # (first, last) days, or (month, None): that month any year


def question_window(question: str) -> Window | None:
    """The days a question is about, if it names any (see the module docstring), else None."""
    days = [d for d in (_day(y, mo, dd) for dd, mo, y in _DMY.findall(question)) if d]
    days += [d for d in (_day(y, mo, dd) for mo, dd, y in _MDY.findall(question)) if d]
    for m1, d1, _m2, _d2, y in _MD_AND.findall(question):
        if first := _day(y, m1, d1):
            days.append(first)
    if days:
        return min(days) - timedelta(days=BEFORE_DAYS), max(days) + timedelta(days=AFTER_DAYS)
    if m := _MY.search(question):
        month, year = MONTHS[m.group(1).lower()], int(m.group(2))
        first = date(year, month, 1)
        nxt = date(year + (month == 12), month % 12 + 1, 1)
        return first, nxt + timedelta(days=AFTER_DAYS - 1)
    if m := _M.search(question):
        if m.group(1).lower() == "may" and not re.search(r"\bin may\b", question, re.I):
            return None  # "might" reads "may": only "in May" counts
        return MONTHS[m.group(1).lower()], None
    return None


def in_window(day: date | None, window: Window | None) -> bool:
    if day is None or window is None:
        return False
    first, last = window
    if last is None:
        return day.month == first
    return first <= day <= last


def asks_when(question: str) -> bool:
    """The question asks for a time: "When did ...", "How long ago ...", "What year ..."."""
    return bool(_WHEN.search(question))


def mentions_time(text: str) -> bool:
    """The text places something in time relatively: "yesterday", "last week", "two days ago"."""
    body = _OPENING.sub("", text, count=1)
    return bool(_RELATIVE.search(body))
