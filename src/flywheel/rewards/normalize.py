"""Text normalisation applied before the judge and the guards read a completion.

Threat: text that a reader (a judge model) sees one way and a pattern matcher another. Fullwidth letters, maths
alphanumerics and small-form brackets (``Ｉｇｎｏｒｅ``, ``𝐈𝐠𝐧𝐨𝐫𝐞``, ``﹤﹤﹤``) are folded by Unicode NFKC; zero-width
characters, soft hyphens, bidi controls and the invisible tag characters (U+E0000..U+E007F, which can carry a
whole hidden instruction) are format characters (category Cf) and are removed. Look-alike letters of other
scripts inside an otherwise Latin word (``Іgnоrе`` with Cyrillic І, о, е) are folded for matching only: the guards
see them folded, the judge sees the original letters.

Invariant (``defuse_delimiters``): after it, the only runs of three or more angle brackets in a judge prompt, and
the only upper-case ``BEGIN``/``END`` block names, are the prompt's own markers.
"""

from __future__ import annotations

import re
import unicodedata

# Cyrillic and Greek letters that render like Latin ones (Unicode confusables, the common subset).
_CONFUSABLES = str.maketrans(
    "АВЕЅІЈКМНОРСТХУаеіјорсхуѕһԁԛԝӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧαοριτυνκ",
    "ABESIJKMHOPCTXYaeijopcxyshdqwlABEZHIKMNOPTYXaopituvk",
)
_WORD = re.compile(r"\w+")
_LATIN = re.compile(r"[A-Za-z]")
_BRACKET_RUN = re.compile(r"[<>‹›˂˃ᐸᐳ❮❯⟨⟩〈〉〈〉](?:[ \t]*[<>‹›˂˃ᐸᐳ❮❯⟨⟩〈〉〈〉]){2,}")
_OPENING = set("<‹˂ᐸ❮⟨〈〈")
_MARKER = re.compile(r"\b(?:BEGIN|END)\s+(?:QUESTION|REFERENCE\s+ANSWER|CANDIDATE\s+ANSWER)\b", re.I)


def normalize(text: str) -> str:
    """NFKC, with every format character (zero-width, soft hyphen, bidi control, tag character) removed."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


def fold_confusables(text: str) -> str:
    """Latin look-alikes replaced by Latin letters in words that mix them with Latin letters; other words (Russian,
    Greek prose) are left as they are."""
    return _WORD.sub(lambda m: m.group(0).translate(_CONFUSABLES) if _LATIN.search(m.group(0)) else m.group(0), text)


def defuse_delimiters(text: str) -> str:
    """``normalize``d text in which a run of three or more angle brackets (look-alikes and spaces between them
    included) becomes brackets joined by middle dots (``<·<·<``), and block names such as ``END CANDIDATE ANSWER``
    are lower-cased: nothing in it can pass for a judge prompt's ``<<<BEGIN NAME nonce>>>`` marker."""
    text = _BRACKET_RUN.sub(lambda m: "·".join("<" if ch in _OPENING else ">" for ch in m.group(0) if not ch.isspace()),
                            normalize(text))  # fmt: skip
    return _MARKER.sub(lambda m: m.group(0).lower(), text)
