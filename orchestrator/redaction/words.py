"""How a run of characters reads: words of an identifier or a path, a number, a hex digest.

The random-run rule (``entropy``) and the placeholder judgement (``placeholders``) both
ask whether a value is made of words — ``rules0-exclude_rules0-True``,
``Win32_Devices_BiometricFramework``, ``/opt/worker/cache`` — before calling it a key.
"""

from __future__ import annotations

import re
from typing import Final

# The words of a name: snake_case, kebab-case, dotted, camelCase, SCREAMING_CASE.
NAME_WORDS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

DIGIT: Final = re.compile(r"[0-9]")


# Where a run of an identifier, a path or a test id splits into its parts.
PART_SEPARATORS: Final = re.compile(r"[-_./+~%]+")
# (a word, camelCase humps, an acronym, a run of digits: findall, each tried once)
_RUNS: Final = re.compile(r"[A-Za-z]+|[0-9]+|[^A-Za-z0-9]+")
_HUMP: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_THREE_DIGIT_RUNS: Final = re.compile(r"[0-9][^0-9]++[0-9]++[^0-9]++[0-9]")
# A digest or an id in hex, a short word before it (``Z60f0ad2...``, a Zuul ref's change id).
HEX_PART: Final = re.compile(r"[A-Za-z]{0,3}[0-9a-f]{7,}|[0-9A-F]{7,}")
# A part that is a word in its own right: four letters or more, three of them lower case.
REAL_WORD: Final = re.compile(r"[A-Za-z][a-z]{3}")


def wordy(part: str, *, hex_ok: bool = True) -> bool:
    """``part`` (letters and digits) reads as a word of an identifier: words written
    lower, Capitalised, camelCase or as an acronym (``GLES1Renderer``, ``rules0``,
    ``Win32``, ``x86``, ``ia2AccessibleTable``), with at most two runs of digits, or a
    number, or (``hex_ok``) a hex digest. A random part fails at its first hump of one
    letter (``KI9DoUJv...``: ``Jv``) or its third run of digits."""
    if part.isdigit() or (hex_ok and HEX_PART.fullmatch(part)):
        return True
    if len(part) <= 2 and part.isascii() and part.isalpha():
        return True  # a file's extension, an abbreviation: ``.a``, ``qt``
    if _THREE_DIGIT_RUNS.search(part):
        return False  # (the common verdict on a random part, found in one search)
    runs = _RUNS.findall(part)
    # One run of digits (``rules0``, ``GLES1Renderer``, ``win32k``), two only after a
    # version's letters (``v2beta1``): ``kjdfqnnros45baj92`` is no identifier.
    digit_runs = sum(run.isdigit() for run in runs)
    if digit_runs > 2 or (digit_runs == 2 and len(runs[0]) > 2 and not runs[0].isdigit()):
        return False
    for run in runs:
        if run.isdigit():
            continue
        if not run.isascii() or not run.isalpha():
            return False
        if len(run) <= 2 and run.islower() and len(runs) > 1:
            continue  # a version's or a numeronym's letters: v1, x86, fc43, s2s, 2d
        humps = _HUMP.findall(run)
        if "".join(humps) != run or not all(len(hump) >= 2 for hump in humps):
            return False
    return True


def made_of_words(core: str) -> bool:
    """Every part of the run (split at ``-_./+~%``) is a word, a number or a hex digest:
    an identifier, a path or a parametrised test id (``rules0-exclude_rules0-True``,
    ``cache-linux-<sha256>--rvm-default``), not a key."""
    return all(wordy(part) for part in PART_SEPARATORS.split(core) if part)
