"""Facts and stated relations for the offline extractor, read from whole sentences.

`is_fact(sentence)`: a sentence is a fact when it reads on its own (the criteria of
benchmarks/data/graph_labels/README.md): a whole declarative sentence of 6-60 words that
ends with a period, is not about the document ("This page shows ...", "In this chapter,
we'll ...", "See ..."), does not narrate the example ("Next, we're adding ...", "Listing
12-7: ..."), and does not lean on a referent elsewhere (it opens with "This", "It", "These",
"But", "The following", a procedure step, or names "the example", "below", "above"; "that
default" or "the same outcome" whose noun it has not named; "If you don't, ...").

`stated_relations(sentence, names)`: relations the sentence states between two of the
entity names it holds, by a verb phrase between them ("X replaces Y", "X is set by Y", "X
was added in Y", ...; RELATION_PATTERNS); two names joined by a plain verb ("a Deployment
manages ReplicaSets") get CO_OCCURS_WITH, names merely listed together get nothing.
"""

from __future__ import annotations

import re

_META = re.compile(
    r"\b(?:this|the|that|next|previous|following|last|first) (?:page|section|chapter|"
    r"tutorial|guide|task|document|doc|example|exercise|walkthrough|listing|step|topic|"
    r"article|book|lesson|part)s?\b|\blisting \d|\bfigure \d|\bchapter \d|\b(?:we|we'll|"
    r"we’ll|we're|we’re|we've|we’ve|let's|let’s|our|us)\b|\b(?:below|above|earlier|later on|"
    r"shown here|as follows|the following)\b|\byou'll\b|\byou’ll\b|\byou've\b|\byou’ve\b",
    re.I)
_OPENERS = re.compile(
    r"^(?:this|that|these|those|it|its|it's|it’s|they|them|their|there|here|such|so|then|"
    r"now|next|first|second|third|finally|also|however|instead|otherwise|again|similarly|"
    r"likewise|thus|hence|therefore|in addition|for example|for instance|see|refer|read|"
    r"check|run|save|open|reopen|create|add|edit|change|go|click|type|enter|make|try|note|"
    r"remember|recall|notice|start|use|install|copy|paste|replace|update|apply|set|define|"
    r"prerequisite|to do|to |once|after|before|in this|in that|for this|for more|more "
    r"|in fact|in other words|lastly|at this point|validate|verify|"
    r"information|for details|as mentioned|as shown|as you|as we|well|okay|ok|yes|no|"
    r"unfortunately|luckily|fortunately|but|and|or|yet|plus)\b", re.I)
# A referent elsewhere: a demonstrative, a third-person pronoun, an ordinal subject, the
# example's own things, the reader's progress.
_DANGLING = re.compile(
    r"\b(?:this|these|those|such|they|them|their|theirs|accordingly|aforementioned)\b|"
    r"^(?:the|a) (?:first|second|third|last|other|latter|former|same|test|variable|output|"
    r"result|code|program|function|method|command|file|values?|exact)\b|"
    r"\bthe (?:variable|example|various|exact|test|sandbox|function|program|code) |"
    r"\byou(?:'re|’re| have| should see| should get| see| now| can now| are now| will see)\b|"
    r"^your\b|^for now\b|\bwould\b|\bsaw\b|\byou can see\b|\b(?:used|shown|defined) here\b|"
    r"\b(?:now|here) (?:has|have|is|are|returns?)\b|"
    # a pointer in the main clause ("..., see X"); the subject of a condition is a pronoun
    r"(?:^|[,;]\s*)(?:see|refer to)\b|^(?:if|when|once|because|since|although|while) "
    r"(?:it|they|this|that)\b|"
    # an example's own one- or two-letter names (`x`, `s`, `p3.x`)
    r"`[a-z][a-z0-9]?(?:\.[a-z0-9_]+)?`|"
    # an example's parts by their place ("the second arm", "the outer loop")
    r"\bthe (?:second|third|fourth|outer|inner|other) (?:`?\w+`? )?(?:arm|loop|call|"
    r"connection|line|case|branch|iteration|element|item|variable|closure|thread|listing|"
    r"example|request)s?\b|\bthe (?:first|second) `?\w+`? arm\b", re.I)
# "that <noun>" after a preposition ("bound only to PVs of that default", "for that
# container"), "the same outcome": a demonstrative whose noun the sentence has not named
# before points at an earlier sentence (`_points_back`); "If you don't, ..." hangs on one.
_THAT_NOUN = re.compile(r"\b(?:of|for|on|with|by|at|into|onto|about|under|against) that "
                        r"(?!(?:of|used|in|which|is|are|was|were|can|will|may|must|has|have|"
                        r"does|do)\b)`?([A-Za-z][\w-]*)", re.I)
_SAME = re.compile(r"\bthe same (outcome|result|effect|way|thing|steps?|procedure|process|"
                   r"command|approach|behaviou?r)\b(?! as\b)", re.I)
_ELLIPTIC = re.compile(r"^if (?:you )?(?:don't|don’t|do not|not)\s*,", re.I)
_BAD_CHARS = re.compile(r"<img|</?\w+[^>]*>|\]\(|\|\s|^\s*[>#*-]|^`|^\[|https?://")
_VERB = re.compile(r"\b(?:is|are|was|were|be|been|has|have|had|can|cannot|can't|must|may|"
                   r"might|should|will|would|does|do|did|need|needs|\w+s)\b")


def is_fact(sentence: str) -> bool:
    """Whether `sentence` (plain text: links and emphasis already rendered) is a fact that
    reads on its own (see the module docstring)."""
    s = sentence.strip()
    words = s.split()
    if not 6 <= len(words) <= 60 or not s.endswith(".") or s.endswith(("...", "…")):
        return False
    if not s[0].isupper() or _BAD_CHARS.search(s) or s.count("`") % 2:
        return False
    if _OPENERS.match(s) or _META.search(s) or _DANGLING.search(s) or _points_back(s):
        return False
    return bool(_VERB.search(s.lower()))


def _points_back(s: str) -> bool:
    """Whether `s` leans on an earlier sentence though no pronoun opens it: "that <noun>"
    or "the same <noun>" whose noun it has not named before ("of that default"; "with that
    resource" after "the resource" is its own), or "If you don't, ..."."""
    if _ELLIPTIC.match(s):
        return True
    for m in [*_THAT_NOUN.finditer(s), *_SAME.finditer(s)]:
        noun = m.group(1).lower().rstrip("s")[:6]
        if noun not in s[:m.start()].lower():
            return True
    return False


# (relation, verb phrase between the two names). Each pattern is matched against the text
# between the end of the first name and the start of the second, whole.
RELATION_PATTERNS: tuple[tuple[str, str], ...] = (
    ("REPLACES", r"(?:replaces|supersedes|succeeds|is used instead of|takes the place of|"
                 r"is (?:the )?(?:replacement|successor) (?:for|of))"),
    ("REPLACED_BY", r"(?:is|was|has been|will be) (?:replaced|superseded) by|"
                    r"(?:is|was|has been) deprecated in favou?r of"),
    ("SET_BY", r"(?:is|are|can be|must be|may be) (?:set|configured|specified|controlled|"
               r"defined|enabled|disabled|determined) (?:by|with|through|via|using|in)(?: the)?"),
    ("ADDED_IN", r"(?:was|were|has been|is) (?:added|introduced|new|available|stable|beta|"
                 r"alpha|graduated(?: to \w+)?|promoted(?: to \w+)?) (?:in|since|as of|with)"),
    ("DEPRECATED_IN", r"(?:was|were|is|has been) deprecated (?:in|since|as of)"),
    ("REMOVED_IN", r"(?:was|were|is|has been|will be) removed (?:in|since|as of)"),
    ("IS_A", r"(?:is|are) (?:a|an|one|the) (?:\w+ ){0,2}?(?:kind|type|sort|form|example) "
             r"of(?: the)?|is an?"),
    ("IMPLEMENTS", r"implements"),
    ("EXTENDS", r"extends|inherits from"),
    ("USES", r"uses|relies on|is built on|runs on|calls"),
    ("DEPENDS_ON", r"depends on|requires|needs"),
    ("CREATES", r"creates|generates|produces|starts|spawns"),
    ("MANAGES", r"manages|controls|owns|schedules|runs"),
    ("CONTAINS", r"contains|holds|includes|stores|wraps"),
    ("RETURNS", r"returns|yields"),
)
_PATTERNS = [(rel, re.compile(rf"^\s*(?:(?:field|setting|option|flag|value|parameter|key|"
                              rf"variable|annotation|label|command|method|function|type)s? )?"
                              rf"(?:also |then |still |now |only |automatically |"
                              rf"always |usually |typically |normally )?(?:{verb})"
                              rf"(?: (?:a|an|the|each|every|all|one|any|its|their))?\s*$", re.I))
             for rel, verb in RELATION_PATTERNS]
# A word every pattern holds: a pattern is tried only when the text between has one.
_TRIGGER = re.compile(r"\b(?:replac|supersed|succeed|instead|place|successor|deprecat|set|"
                      r"configur|specifi|control|defin|enabl|disabl|determin|add|introduc|"
                      r"new|availab|stable|beta|alpha|graduat|promot|remov|is|are|implement|"
                      r"extend|inherit|use|relie|built|run|call|depend|requir|need|creat|"
                      r"generat|produc|start|spawn|manag|own|schedul|contain|hold|includ|"
                      r"store|wrap|return|yield)")
_PLAIN_VERB = re.compile(r"^\s*(?:\w+ly )?(?:[a-z]+s|can \w+|will \w+|must \w+|is \w+ed|are "
                         r"\w+ed)(?: (?:a|an|the|each|every|all|its|their|one or more|"
                         r"multiple|many))?\s*$")


def find_word(low: str, name: str) -> int:
    """Where lower-cased `name` first occurs in `low` as a whole word (-1: nowhere)."""
    at = low.find(name)
    while at >= 0:
        end = at + len(name)
        if ((at == 0 or not (low[at - 1].isalnum() or low[at - 1] in "_-"))
                and (end == len(low) or not (low[end].isalnum() or low[end] in "_-"))):
            return at
        at = low.find(name, at + 1)
    return -1


def _spans(sentence: str, names: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, name) of each name's first occurrence as a whole word, in order."""
    low = sentence.lower()
    out = []
    for name in names:
        at = find_word(low, name.lower())
        if at >= 0:
            out.append((at, at + len(name), name))
    out.sort()
    return [s for i, s in enumerate(out) if not any(
        o[0] <= s[0] and s[1] <= o[1] and o != s for o in out)]


def stated_relations(sentence: str, names: list[str]) -> list[tuple[str, str, str]]:
    """(source, relation, target) for each pair of adjacent names of `sentence` joined by a
    verb phrase (RELATION_PATTERNS, else a plain verb: CO_OCCURS_WITH). Names only listed
    together ("A, B and C") or far apart give nothing."""
    spans = _spans(sentence, names)
    out = []
    for (_, e1, a), (s2, _, b) in zip(spans, spans[1:]):
        between = re.sub(r"\s*\([^()]*\)", "", sentence[e1:s2].replace("`", ""))
        if len(between.split()) > 8 or re.search(r"[,;:()]", between):
            continue
        low = between.lower()
        for rel, pattern in _PATTERNS if _TRIGGER.search(low) else ():
            if pattern.match(between):
                out.append((a, rel, b))
                break
        else:
            if _PLAIN_VERB.match(between.lower()):
                out.append((a, "CO_OCCURS_WITH", b))
    return out
