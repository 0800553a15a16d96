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


# Letters of other scripts that look like ASCII ones (a subset of Unicode TR39's confusables: the Cyrillic and Greek
# letters drawn as Latin ones, and the Latin dotless i and script a, g), mapped to the ASCII letter. NFKC does not
# map them (they are letters of their own), so ``trаcefence.status`` with a Cyrillic ``а`` would fold to itself.
CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x",
    "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ү": "y",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "І": "I", "Ј": "J", "Ѕ": "S", "Ү": "Y",
    # Greek
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X",
    # Latin letters outside ASCII drawn as ASCII ones
    "ı": "i", "ɑ": "a", "ɡ": "g",
})  # fmt: skip


def unconfused(text: str) -> str:
    """``text`` with the letters that look like ASCII ones (:data:`CONFUSABLES`) mapped to them:
    ``"trаcefence"`` (a Cyrillic ``а``) -> ``"tracefence"``. ASCII text is returned as is."""
    return text if text.isascii() else text.translate(CONFUSABLES)


@lru_cache(maxsize=1024)
def folded_word(text: str) -> str:
    """``text`` as :func:`visible`, case-folded and without separators (``-``, ``_``, ``.``, white space):
    ``"Execute-Tool\\u200b"`` -> ``"executetool"``."""
    return _SEPARATORS.sub("", visible(text)).casefold()
