"""Model text made safe to keep: lone UTF-16 surrogates and NULs replaced where a model's answer
enters the harness.

docs/design.md §6 tells it for readers. A model service answers JSON, and JSON may carry what
UTF-8 cannot: a lone UTF-16 surrogate (a JSON escape of half of a pair) decodes to a Python
string that every `.encode("utf-8")` refuses, so one such character in an answer would stop the
step at the journal. A NUL is valid UTF-8 but ends C strings, terminals and many stores early.
Both are replaced by U+FFFD (the Unicode replacement character) where the text enters the
harness: the executor client's answer (`harness.adapters.executor.client.parse_completion`) and
the guidance answer (`harness.run.rollout`). How many characters were replaced is recorded in
the entry's `model_text_repairs` (field -> count), so the record says the text is not character
for character what the service sent; `valid_data` is the backstop for every other string of a
record.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "valid_data", "valid_text"]

REPLACEMENT = "\ufffd"
#: Lone surrogates (a valid pair is one code point once JSON is decoded) and NUL.
_UNSAFE = re.compile("[\\ud800-\\udfff\\x00]")


def valid_text(text: str) -> tuple[str, int]:
    """`text` with every lone surrogate and NUL replaced by U+FFFD, and how many were."""
    return _UNSAFE.subn(REPLACEMENT, text)


def valid_data(value: Any) -> Any:
    """JSON-like data with `valid_text` applied to every string, keys included."""
    if isinstance(value, str):
        return valid_text(value)[0]
    if isinstance(value, dict):
        return {valid_data(key): valid_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [valid_data(item) for item in value]
    return value
