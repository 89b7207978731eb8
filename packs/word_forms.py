"""Word forms, for packs/text.py (which gives them as its own `stem` and `singular`): the
Porter (1980) stemmer, so "configuring", "configured" and "configuration" meet at
"configur", and a readable singular ("policies" → "policy", where Porter gives "polici";
"appendices" → "appendix", IRREGULAR_PLURALS),
which tasks/extract/entities.py makes an entity name's merge key with, so a change to
`singular` changes entity ids.
"""

from __future__ import annotations

from functools import lru_cache

# Words ending in "s" that are not plurals (checked after lower-casing).
NOT_PLURAL = frozenset({
    "kubernetes", "status", "class", "alias", "bias", "canvas", "corpus", "process", "access",
    "address", "express", "analysis", "basis", "redis", "postgres", "aws", "dns", "tls", "https",
    "ios", "macos", "windows", "series", "species", "news", "means", "always", "atlas",
    "chaos", "focus", "bonus", "census", "virus", "campus", "axis", "thesis",
})
# Plurals no ending rule reads ("appendices" is no "appendice", and Porter stems it
# "appendic" where "appendix" stays "appendix"): the singular, which `stem` also starts from.
IRREGULAR_PLURALS = {
    "appendices": "appendix", "indices": "index", "matrices": "matrix", "vertices": "vertex",
    "criteria": "criterion", "phenomena": "phenomenon", "analyses": "analysis",
    "hypotheses": "hypothesis", "theses": "thesis", "parentheses": "parenthesis",
    "children": "child", "schemata": "schema",
}


def singular(word: str) -> str:
    """The singular of a lower-case word, read plainly ("policies" → "policy", "boxes" →
    "box"); a word of 3 letters or fewer, one with a non-letter or one of NOT_PLURAL is
    returned unchanged."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if len(word) <= 3 or not word.isalpha() or word in NOT_PLURAL:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zzes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# --- the Porter stemmer ----------------------------------------------------------------------

_VOWELS = frozenset("aeiou")


def _forms(w: str) -> str:
    """"c" or "v" for each letter of `w`: Porter's consonants and vowels, "y" a vowel after
    a consonant and a consonant first or after a vowel."""
    out, cons = [], False
    for i, ch in enumerate(w):
        cons = ch not in _VOWELS and (ch != "y" or i == 0 or not cons)
        out.append("c" if cons else "v")
    return "".join(out)


def _m(w: str) -> int:
    """Porter's measure: the number of vowel-consonant sequences in `w`."""
    return _forms(w).count("vc")


def _has_vowel(w: str) -> bool:
    return "v" in _forms(w)


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _forms(w)[-1] == "c"


def _cvc(w: str) -> bool:
    return len(w) >= 3 and _forms(w)[-3:] == "cvc" and w[-1] not in "wxy"


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_m: int) -> str:
    for suffix, repl in rules:
        if w.endswith(suffix):
            base = w[: len(w) - len(suffix)]
            return base + repl if _m(base) > min_m else w
    return w


_STEP2 = (("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
          ("izer", "ize"), ("abli", "able"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
          ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
          ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
          ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"))
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
          ("ful", ""), ("ness", ""))
_STEP4 = ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
          "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize")


def _step1(w: str) -> str:
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if w.endswith("eed"):
        return w[:-1] if _m(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_cons(w) and w[-1] not in "lsz":
                return w[:-1]
            if _m(w) == 1 and _cvc(w):
                return w + "e"
            return w
    return w


_STEP4_LONGEST_FIRST = tuple(sorted(_STEP4, key=len, reverse=True))


def _step4(w: str) -> str:
    for suffix in _STEP4_LONGEST_FIRST:
        if w.endswith(suffix):
            base = w[: len(w) - len(suffix)]
            if suffix == "ion" and not base.endswith(("s", "t")):
                return w
            return base if _m(base) > 1 else w
    return w


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter stem of a lower-case word; words of 3 letters or fewer and words with a digit,
    underscore or other non-letter are returned unchanged."""
    word = IRREGULAR_PLURALS.get(word, word)
    if len(word) <= 3 or not word.isalpha():
        return word
    w = _step1(word)
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    w = _step4(w)
    if w.endswith("e"):
        base = w[:-1]
        if _m(base) > 1 or (_m(base) == 1 and not _cvc(base)):
            w = base
    if _m(w) > 1 and _double_cons(w) and w.endswith("l"):
        w = w[:-1]
    return w
