"""How a name or a convention value is compared when its writer may have misspelt it.

One place for what "the same but for how it is written" means, so that every reader that holds a
near-miss (docs/DECISIONS.md 183, 190, 203, 208) folds alike. Pure functions of ``str``; never raise.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Separators a writer may put between the words of a value or drop (``execute-tool``, ``execute.tool``).
_SEPARATORS = re.compile(r"[-_.\s]+")


@lru_cache(maxsize=1024)
def visible(text: str) -> str:
    """``text`` NFKC-normalized, without its Unicode format characters (category ``Cf``: U+200B zero-width
    space, U+FEFF, U+00AD soft hyphen, U+2060...), which no reader shows. ASCII text is returned as is
    (cached: names and values repeat)."""
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")


@lru_cache(maxsize=1024)
def folded_word(text: str) -> str:
    """``text`` as :func:`visible`, case-folded and without separators (``-``, ``_``, ``.``, white space):
    ``"Execute-Tool\\u200b"`` -> ``"executetool"``."""
    return _SEPARATORS.sub("", visible(text)).casefold()
