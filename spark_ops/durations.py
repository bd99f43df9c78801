"""Durations as users type them: one parser for every option that takes one.

A duration is a number of seconds (``300``, ``2.5``) or text in Spark's
interval style (``"10 minutes"``, ``"1 hour 30 minutes"``) or the short
style of command lines (``"10m"``, ``"1h30m"``, ``"500ms"``, ``"2d"``).  Months
and years have no fixed length, so they are refused rather than guessed.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
import re

#: Seconds per unit, every spelling accepted.
UNITS = {
    **dict.fromkeys(("us", "microsecond", "microseconds"), 1e-6),
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1e-3),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("w", "week", "weeks"), 604800.0),
}
_CALENDAR = ("mo", "mon", "mons", "month", "months", "y", "yr", "yrs", "year", "years")
_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"  # ASCII digits: \d would take any script's
_PART = re.compile(_NUMBER + r"\s*([a-z]*)")
_WHOLE = re.compile(r"(?:\s*" + _NUMBER + r"\s*[a-z]*)+\s*")
EXAMPLES = "a number of seconds or a duration such as 10s, 500ms, 5m, 1h30m, '10 minutes'"


def seconds(value, what: str = "duration") -> float:
    """``value`` (a number of seconds or duration text) in seconds, a
    positive finite number; ``ValueError`` naming ``what`` otherwise.
    A whole number of seconds comes back as an ``int``; any real number
    (NumPy's, a ``Decimal``) and a ``timedelta`` are taken too."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be {EXAMPLES}, got {value!r}")
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        try:
            total = float(value)
        except OverflowError:  # an int beyond a float's range (a Decimal becomes inf instead)
            # its repr may be thousands of digits (or beyond Python's int-to-text limit): not quoted
            raise ValueError(f"{what} must be positive and finite, got a number beyond a float's range") from None
        except ValueError:  # a signalling NaN Decimal
            raise ValueError(f"{what} must be positive and finite, got {value!r}") from None
    elif isinstance(value, dt.timedelta):
        total = value.total_seconds()
    elif isinstance(value, str):
        total = _parse(value, what)
    else:
        raise ValueError(f"{what} must be {EXAMPLES}, got {type(value).__name__} {value!r}")
    if not (total > 0 and math.isfinite(total)):
        raise ValueError(f"{what} must be positive and finite, got {value!r}")
    return int(total) if total.is_integer() else total


def _parse(text: str, what: str) -> float:
    t = text.strip().lower()
    if t.startswith("interval "):  # Spark SQL's literal forms: INTERVAL 5 MINUTES, INTERVAL '5' MINUTE
        t = t[len("interval "):].replace("'", " ").strip()
    if t.startswith("-") and _WHOLE.fullmatch(t[1:]):  # '-5 minutes', INTERVAL '-10' MINUTE
        raise ValueError(f"{what} must be positive, got {text!r}")
    parts = _PART.findall(t)
    if not parts or not _WHOLE.fullmatch(t):
        raise ValueError(f"{what} must be {EXAMPLES}, got {text!r}")
    for _, unit in parts:
        if unit not in UNITS and (unit or len(parts) > 1):
            reason = ("a number without a unit must stand alone" if not unit else
                      "months and years have no fixed length" if unit in _CALENDAR else f"unknown unit {unit!r}")
            raise ValueError(f"{what} must be {EXAMPLES}, got {text!r} ({reason})")
    return sum(float(number) * UNITS[unit or "s"] for number, unit in parts)


def in_micros(value: float) -> int:
    """``value`` seconds in whole microseconds, rounded: the one conversion
    the checks of ``slide=`` and the plans that align windows on it share.
    O(1)."""
    return round(value * 1_000_000)


def micros(value: float, what: str = "duration") -> int:
    """``value`` seconds (:func:`seconds`' result) in whole microseconds,
    Spark's unit; ``ValueError`` naming ``what`` if that is none (a
    positive duration must not become zero)."""
    us = in_micros(value)
    if us < 1:
        raise ValueError(f"{what} must be at least one microsecond, got {value!r}")
    return us


def whole_micros(value: float, what: str = "duration") -> int:
    """:func:`micros` of a duration that must be a whole number of them (a
    window aligned on microseconds: a ``slide=`` window's slide and range);
    ``ValueError`` naming ``what`` otherwise."""
    us = micros(value, what)
    if not math.isclose(value * 1_000_000, us, rel_tol=1e-9, abs_tol=1e-6):
        raise ValueError(f"{what} {value!r} seconds is not a whole number of microseconds, which slide= windows "
                         "are counted in (as Spark's timestamps are)")
    return us


def spark_interval(value: float, what: str = "duration") -> str:
    """``value`` seconds as an interval string Spark takes
    (``withWatermark``, triggers), exact to the microsecond."""
    return f"{micros(value, what)} microseconds"
