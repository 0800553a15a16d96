# cython: annotation_typing=True, boundscheck=False, wraparound=False
"""Whether a text holds any of a fixed list of words: the prefilters the normalizer runs on every recorded value
before a costlier reading (a framework's error templates, a producer's stand-ins for hidden values).

One rule, two executions: :meth:`Words.any_in` is ``any(word in text for word in words)`` (with ``fold``: on
``text.lower()``). Compiled, an ASCII text is scanned once in C, each position tested against the words that start
with its two characters; pure Python, and for a text that is not ASCII, the substring tests run as written
(``tests/normalize/test_word_search.py`` holds the two equal on any text).
"""

from __future__ import annotations

from typing import Iterable

import cython

_ASCII = cython.declare(cython.uint, 128)  # the codes the tables cover


@cython.cclass
class Words:
    """A fixed list of non-empty ASCII words (``ValueError`` otherwise), compared case-folded when ``fold``
    (the words are then given in lower case: ``ValueError`` otherwise)."""

    words: tuple
    fold: cython.bint
    single: bytes  # 128 bytes: 1 where a one-character word is that character
    pairs: bytes  # 128 x 128 bytes: 1 where some word starts with that pair of characters
    by_pair: dict  # first two characters' codes (a * 128 + b) -> the words starting with them, as bytes

    def __init__(self, words: Iterable[str], fold: bool = False) -> None:
        self.words = tuple(words)
        self.fold = fold
        single = bytearray(_ASCII)
        pairs = bytearray(_ASCII * _ASCII)
        by_pair: dict = {}
        for word in self.words:
            if not word or not word.isascii() or (fold and word != word.lower()):
                raise ValueError(f"{word!r}: the words are non-empty ASCII{', in lower case' if fold else ''}")
            if len(word) == 1:
                single[ord(word)] = 1
                continue
            pair = ord(word[0]) * _ASCII + ord(word[1])
            pairs[pair] = 1
            by_pair.setdefault(pair, []).append(word.encode("ascii"))
        self.single = bytes(single)
        self.pairs = bytes(pairs)
        self.by_pair = {pair: tuple(found) for pair, found in by_pair.items()}

    @cython.ccall
    def any_in(self, text) -> cython.bint:
        """True when ``text`` (a ``str``, or a subclass of it: the OpenAI Agents SDK's ``AgentText``) holds one of the
        words (case-folded when ``fold``). Untyped on purpose: compiled, a ``str`` annotation refuses a subclass."""
        if type(text) is not str:
            text = str(text)
        if cython.compiled and text.isascii():
            data: bytes = text.encode("ascii")
            return self._scan(data, len(data))
        if self.fold:
            text = text.lower()
        for word in self.words:
            if word in text:
                return True
        return False

    @cython.cfunc
    @cython.exceptval(check=False)
    def _scan(self, data: bytes, size: cython.Py_ssize_t) -> cython.bint:
        buf: cython.p_uchar = data
        single: cython.p_uchar = self.single
        pairs: cython.p_uchar = self.pairs
        fold: cython.bint = self.fold
        i: cython.Py_ssize_t
        a: cython.uint
        b: cython.uint
        a = _folded(buf[0], fold) if size else 0
        for i in range(size):
            if single[a]:
                return True
            if i + 1 == size:
                break
            b = _folded(buf[i + 1], fold)
            if pairs[a * _ASCII + b] and self._word_at(buf, size, i, a * _ASCII + b):
                return True
            a = b
        return False

    @cython.cfunc
    def _word_at(self, buf: cython.p_uchar, size: cython.Py_ssize_t, start: cython.Py_ssize_t, pair: cython.uint) -> cython.bint:
        word: bytes
        letters: cython.p_uchar
        length: cython.Py_ssize_t
        j: cython.Py_ssize_t
        for word in self.by_pair[pair]:
            length = len(word)
            if start + length > size:
                continue
            letters = word
            j = 2
            while j < length and _folded(buf[start + j], self.fold) == letters[j]:
                j += 1
            if j == length:
                return True
        return False


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _folded(c: cython.uint, fold: cython.bint) -> cython.uint:
    """An ASCII character's code, upper case lowered when ``fold`` (``str.lower`` on ASCII)."""
    return c + 32 if fold and 65 <= c <= 90 else c
