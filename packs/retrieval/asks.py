"""What a question asks for, and whether an answer unit has it.

`question_types(question)` reads the question's types from its wording ("how many" → a
number, "which flag" → a name, "why" → a reason, "what are the rules" → a list ...);
`has(kind, unit, ...)` says whether a unit holds a thing of that type that the question does
not write itself. packs/retrieval/extractive.py gives a unit TYPE_BONUS for each. `how_to`,
`what_is` and `what_happens` read how it asks (the reader's features use them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from packs import text as text_rules
from packs.retrieval.segment import Unit

__all__ = ["asking", "has", "how_to", "pair", "parts", "question_types", "what_happens", "what_is",
           "shares_kind", "with_kind"]

_HOW_DO = re.compile(r"^\s*how (do|can|should|would) (i|you|we)\b|\bhow to\b", re.I)
_COMMAND = re.compile(r"\bwhat command\b|\bwhich command\b", re.I)
_WHAT_IS = re.compile(r"^\s*(what|who)\s+(is|are|was|were)\b|\bwhat does .+ (mean|stand for|do)\b|"
                      r"\bwhat do(es)? (we|you) mean\b|\bdefine\b|\bmeaning of\b|"
                      r"\bdifferen(ce|t)\b|\bdiffers?\b|\bcompared? (to|with)\b|\bvs\.?\s|"
                      r"\bversus\b", re.I)
# What happens when or if: the answer is a consequence ("..., the container is killed").
_HAPPENS = re.compile(r"\bwhat (happens|will happen|would happen|occurs)\b|\bwhat if\b|"
                      r"\bhappens? (when|if|after|once)\b|\bwhat does .+ do (when|if)\b", re.I)


def how_to(question: str, commands: bool = True) -> bool:
    """Whether the question asks how to do something ("How do I drain a node?"), or with
    `commands` also for the command that does it ("Which command drains a node?")."""
    return (_HOW_DO.search(question) is not None
            or (commands and _COMMAND.search(question) is not None))


def what_is(question: str) -> bool:
    """Whether it asks what something is or means, or how two things differ."""
    return _WHAT_IS.search(question) is not None


def what_happens(question: str) -> bool:
    """Whether it asks what happens when or if something does."""
    return _HAPPENS.search(question) is not None

_TYPES: dict[str, re.Pattern[str]] = {
    "person": re.compile(r"\b(who|whom|whose)\b", re.I),
    "place": re.compile(r"\bwhere\b", re.I),
    "number": re.compile(
        r"^\s*when\b|\b(how (many|much|long|old|often|far|large|big|fast|soon|frequently)|"
        r"what (year|date|time|percentage|percent|number|port|version|release|size|age|amount)|"
        r"which (year|date|port|version|release)|since when|at what)\b|"
        # "Which TCP port", "what average CPU utilization", "what minimum Rust version"
        r"\b(which|what)( [\w-]+){1,2} (ports?|percentage|percent|utilization|ratio|timeout|"
        r"interval|duration|period|size|count|amount|number|year|date|version|release)\b", re.I),
    "name": re.compile(
        r"\b(which|what|name of)\b[\w\s-]{0,30}?\b(settings?|flags?|options?|fields?|"
        r"commands?|parameters?|arguments?|annotations?|labels?|keys?|variables?|"
        r"functions?|methods?|macros?|traits?|types?|keywords?|attributes?|files?|"
        r"subcommands?|plugins?|modes?|polic(y|ies)|values?|names?|crates?|tools?|"
        r"resources?|objects?|kinds?|fields?|operators?|syntax|extensions?|"
        r"controllers?|endpoints?|headers?|directories|directory|paths?)\b", re.I),
    # A default asked for ("What is the default ...", "by default", "defaults to"), not
    # "default" naming a thing ("in the default namespace", "marked as default").
    "default": re.compile(
        r"\b((what|which)\b[\w\s'-]{0,25}\bdefault|default (value|setting|behaviou?r|is|"
        r"are|for|when|if)|defaults|by default|unless|otherwise|without (any|a|an|setting)|"
        r"(if|when) (i |you )?(leave|don't set|do not set|omit|skip)|"
        r"(does|do|did|has|have|is|are)n't (set|give|specify|provide|configure)|"
        r"not (set|given|specified|configured)|omitted|left out|unset|unspecified|"
        r"when nothing)", re.I),
    "term": re.compile(r"\b(called|what do (we|you|they|people) call|known as|(term|word) for)\b",
                       re.I),
    # "why" opening the question or one of its clauses ("After I turned auditing on, the
    # server used more RAM. Why does that happen?", "..., and why?"), not "about why X".
    "why": re.compile(r"(?:^|[.?!;:,(]\s*|\b(?:and|but|or|explain)\s+)why\b|\bfor what "
                      r"purpose\b|\bwhat(?:'s| is| are) the (?:\w+ )?(?:reasons?|purpose)\b", re.I),
    "list": re.compile(
        r"\b(what|which) are (the|some)\b|^\s*list\b|\blist (of|all|the|every)\b|"
        r"\b(what|which) (\w+ ){0,2}"
        r"(rules|steps|kinds|types|ways|phases|stages|states|conditions|requirements|"
        r"components|categories|levels|classes)\b", re.I),
}
# What a unit says when no value is given: "defaults to", "When `minDomains` is not specified
# (nil), the constraint behaves as if ...", "If omitted, ...".
_DEFAULT = re.compile(r"\bdefault|\b(?:not|n't) (?:specified|set|given|provided)\b|\bunset\b|"
                      r"\bunspecified\b|\bomitted\b|\bleft (?:empty|out|unset)\b", re.I)
_REASON = re.compile(r"\b(because|so that|since|in order to|to avoid|otherwise|this means|"
                     r"that way|reasons?|due to|so it|so the|leads? to|causes?|ensures?|"
                     r"to enable|prevents?|preventing)\b|,\s+(?:as|so)\s", re.I)


# "Which effects can a taint have?": several things of one kind, asked by a plural noun.
_PLURAL_ASK = re.compile(r"\b(which|what) ([\w-]+ ){0,2}[\w-]*[^\Wsiu]s (are|can|could|do|"
                         r"does|may|might|must|should|will)\b", re.I)


def question_types(question: str) -> set[str]:
    """What the question asks for: "number", "name", "person", "place", "why", "list",
    "default" (none, one or more)."""
    kinds = {name for name, pattern in _TYPES.items() if pattern.search(question)}
    if _PLURAL_ASK.search(question):
        kinds.add("list")
    return kinds


def _novel(found: Iterable[str], asked: set[str]) -> bool:
    """Whether `found` (names, numbers, identifiers of a unit, as `_found` gives them) has
    one the question does not write itself: the answer to "who ..." is a name the question
    lacks."""
    return any(w not in asked for w in found)


@lru_cache(maxsize=65536)  # the same units recur for each part of a question, and across
def _found(kind: str, display: str, raw: str) -> tuple[str, ...]:
    """The numbers, identifiers, capitalised names or emphasised terms (by `kind`) that a
    unit writes (`display`; `raw`: its Markdown), lower-cased, stop words out."""
    if kind == "number":
        found = text_rules.NUMBER.findall(display) + text_rules.NUMBER_WORD.findall(display)
    elif kind == "name":
        found = text_rules.identifiers(raw)
    elif kind == "term":
        found = text_rules.EMPHASIS.findall(raw)
    else:  # person, place
        found = text_rules.CAPITALISED.findall(" " + display)
    return tuple(w for w in (f.lower().strip(".,") for f in found)
                 if w not in text_rules.STOP_WORDS)


@lru_cache(maxsize=65536)
def _says(pattern: re.Pattern[str], display: str) -> bool:
    return pattern.search(display) is not None


def has(kind: str, u: Unit, raw: str, asked: set[str], term_bonus: bool = True) -> bool:
    """Whether unit `u` (`raw`: its Markdown) has what a question of `kind` asks for;
    `asked`: the question's words as written, lower-cased; `term_bonus`: whether a term
    the unit introduces in italics or bold answers "what is X called"."""
    if kind in ("number", "person", "place"):
        return _novel(_found(kind, u.display, raw), asked)
    if kind == "name":
        return u.kind == "code" or _novel(_found(kind, u.display, raw), asked)
    if kind == "term":
        return term_bonus and _novel(_found(kind, u.display, raw), asked)
    if kind == "why":
        return _says(_REASON, u.display)
    if kind == "default":
        return _says(_DEFAULT, u.display)
    return u.kind == "leadin" and "\n- " in u.display


# Where a question asks a second thing: ", and which ...", "; how ...", " and why ...".
_ASKING = (r"(?:what|which|how|why|where|when|who|whose|whom|does|do|did|is|are|was|were|"
           r"can|could|should|will|would|must|may|(?:in|on|at|for|to|from|by|with|into|under)"
           r" (?:which|what))\b")
_SECOND = re.compile(
    rf"(?:,\s*and|;|,\s*but|\band)\s+(?={_ASKING})|"
    # ", and after the cluster exists, which ConfigMap ...": a clause, then the question
    rf",\s*and\s+(?=[^,;?]{{3,60}},\s*{_ASKING})", re.I)
# A second question sentence's opening word ("...? And in the guestbook tutorial, what ...?").
_AND_OPENING = re.compile(r"^(?:(?:and|also|plus)\b[,\s]*)?", re.I)
# An imperative sentence that asks for two things: "Name the feature gate that ..., and the
# lowest containerd version ..." (the second thing after ", and the").
_IMPERATIVE = re.compile(r"^(?:name|list|give|tell me|state|say)\b", re.I)
_AND_THE = re.compile(r",\s*and\s+(?=the\b)", re.I)
# "the difference between A and B", "A vs B", "compare A and/with B", "How is A different
# from B?", "How does A differ from B?".
_PAIR = re.compile(r"\b(?:difference|differences) between (.+?) and (.+?)\s*[?.!]*$|"
                   r"^(?:.*?\b)?(?:compare|comparing) (.+?) (?:and|with|to) (.+?)\s*[?.!]*$|"
                   r"^(.+?)\s+(?:vs\.?|versus)\s+([^:;,?]+?)\s*(?:[:;,].*)?[?.!]*$|"
                   r"^(?:how|in what ways?)\s+(?:is|are|does|do)\s+(?P<from_a>.+?)\s+"
                   r"(?:different from|differ from)\s+(?P<from_b>[^,;]+?)\s*[?.!]*$", re.I)
# Where the second thing's own words end and the context the pair shares begins ("an
# expression | in Rust", "OnFailure restart policies | for a Pod").
_CONTEXT = re.compile(r"\s+(?=(?:in|for|of|on|at|inside|within|under)\s)", re.I)


def asking(part: str) -> str:
    """A question (or its first part) without the statements that set the scene before it
    ("I set X on a Service. Which flag ..." → "Which flag ..."): what it asks, read alone
    for its kind and its parts (the whole question keeps the scene for the search)."""
    said = text_rules.sentences(part)
    while len(said) > 1 and said[0].endswith("."):
        said = said[1:]
    return " ".join(said)


def pair(question: str) -> tuple[str, str] | None:
    """The two things a question asks how they differ, as written ("a liveness", "a
    readiness probe"), or None (the forms of _PAIR)."""
    m = _PAIR.search(question)
    if m is None:
        return None
    a, b = [g for g in m.groups() if g is not None][:2]
    return a, b


_ARTICLES = frozenset(("a", "an", "the"))


def shares_kind(question: str) -> bool:
    """Whether a pair question may write the things' kind once for both ("a liveness and a
    readiness probe", "Static vs dynamic provisioning"): not one of _PAIR's "How is A
    different from B?" form, where a shorter first thing is whole ("How are containers
    different from virtual machines?" is not about "containers machines")."""
    m = _PAIR.search(question)
    return m is None or m["from_a"] is None


def with_kind(a: str, own: str, whole: bool = False) -> str:
    """The first thing of a pair with the kind the second names, where the question writes
    it once for both ("a liveness [probe] and a readiness probe"); `own`: the second
    thing's own words (without the context the pair shares). `whole`: every word of the
    second past the first's count, articles not counted ("the NoSchedule [taint effects]
    and NoExecute taint effects"; compare.things, which matches subjects: the parts'
    rankings read the shorter form better on the dev rows)."""
    if not whole:
        head = own.split()[-1] if own.split() else ""
        if len(a.split()) < len(own.split()) and head and head.lower() not in a.lower():
            return f"{a} {head}"
        return a
    mine, theirs = ([w for w in x.split() if w.lower() not in _ARTICLES] for x in (a, own))
    if not theirs or len(mine) >= len(theirs) or theirs[-1].lower() in a.lower():
        return a
    return " ".join([a, *theirs[len(mine):]])


def parts(question: str) -> list[str]:
    """The things a question asks about when it asks about two or more, each as a question
    of its own ("Which field removes a finished Job, and which field says how many failed
    Jobs to keep?" → its two halves; "What is the difference between a liveness and a
    readiness probe?" → "What is a liveness probe?", "What is a readiness probe?": the
    units that define each answer it; "Does X start its Pods one by one? And in the Job
    task, what does `$ITEM` mean?" → its two question sentences; ", and after the cluster
    exists, which ConfigMap ..." → the clause goes with the second); [] for a question about
    one thing. A part needs two words of its own that are not stop words (one, of a pair);
    the first keeps the scene set before it when it has none without it ("... never reach
    my backend. Why not, and ...")."""
    paired = pair(question)
    if paired:
        a, b = paired
        own = _CONTEXT.split(b, maxsplit=1)
        a = with_kind(a, own[0]) if shares_kind(question) else a
        if len(own) > 1 and own[1].lower() not in a.lower():
            a = f"{a} {own[1]}"  # "a statement [in Rust] and an expression in Rust"
        found = [f"What is {a}?", f"What is {b}?"]  # each thing defined on its own
    else:
        seps = [(m.start(), m.end()) for m in _SECOND.finditer(question)]
        said = text_rules.sentence_spans(question)
        for a, b in said:
            if _IMPERATIVE.match(question[a:b]):
                seps += [(a + m.start(), a + m.end()) for m in _AND_THE.finditer(question[a:b])]
        asked = [(a, b) for a, b in said if question[a:b].endswith("?")]
        for (_, b), (a, _) in zip(asked, asked[1:]):  # two questions, one sentence each
            if not any(b <= i < a for i, _ in seps):
                seps.append((b, a + _AND_OPENING.match(question[a:]).end()))
        ends = [0, *(j for _, j in sorted(seps))]
        starts = [i for i, _ in sorted(seps)] + [len(question)]
        found = [question[i:j].strip(" ,;") for i, j in zip(ends, starts)]
        # The first part without the scene before it, unless that leaves it nothing of its
        # own ("... never reach my backend. Why not, and ..." asks about the scene).
        first = asking(found[0])
        found[0] = first if len(set(text_rules.terms(first))) >= 2 else found[0]
    least = 1 if paired else 2
    found = [f for f in found if len(set(text_rules.terms(f))) >= least]
    return found if len(found) >= 2 else []
