"""Which questions are about the whole pack, and what kind of item they ask for
(packs/retrieval/whole_pack.py answers them).

`rule_kind` reads the question with hand rules (an aside in parentheses left out), one feature
of the learned model that decides (packs/retrieval/question_kinds.py): "overview" (what
does/do X cover, what sections make up X, walk me through X, the main topics of X, what is
this pack about), "across" (in each / across or each of the pages, chapters, releases (not
"across zones") / in which situations / from release to release / compare / each time /
", and what does each ..." / ", depending on how ..." / in how many ways), "list" (who are
the + a plural noun, I need every / give me the + a plural noun, which/what + a plural
noun (after an aside too: "Besides A, what fields ...") or several in a row ("which
functions, structs and methods does ..."), and a verb, list all/every, what kinds of, what
does the book (docs, guide, ...) say/explain about/offer for; not "which Cargo command
checks that ...", whose head noun is singular, nor "what does X use Y for" or "what kind
of", nor a question that counts what it asks for: "What two kinds of label selector ...",
"What are the three stable API kinds ..." ask for one set the docs name together, nor
"what are X used for?", where "what" is the object of the closing preposition, nor "what
X do Y have?", whose head X comes before the auxiliary; after an opening phrase, ", which
tools do ..."); None for a question about one thing (and for every "why", "how many" and
yes-or-no one), which keeps the single-passage answer.
`wanted_types` maps the kind of item asked for to entity types (subcommands: command;
flags: flag; ...), `head_stem` gives the stem of the plural noun asked for. Whether the
single-passage answer already quotes the whole list asked for: whole_pack_above.py.
"""

from __future__ import annotations

import re

from packs import text as text_rules
from packs.retrieval.asks import asking, how_to
from packs.retrieval.whole_pack_items import ASIDE_FIRST, ASIDE_WORDS, EXCEPT

_OVERVIEW = re.compile(
    r"\bmain topics\b|\bwhat (?:topics )?(?:does|do) (?:the |this )?.{0,80}\bcover\b|"
    r"\bwhat (?:sections|parts|pages|topics) make up\b|"
    r"\bwhat (?:is|are) (?:this|the) (?:pack|documentation|docs|book|site|corpus)\b.{0,20}about|"
    r"\bwhat (?:does|do) (?:the |this )?.{0,80}\bwalk (?:you|me|us|readers) through\b|"
    r"^\s*walk me through (?:the|this)\b|"
    r"\bwhat (?:sub)?sections\b.{0,120}\bbreak (?:down )?into\b|"
    r"\boverview of\b|\bsummar(?:y|ise|ize) (?:of )?(?:the|this)\b|\btopics (?:does|do|are)\b|"
    r"\boutline of\b|\btable of contents\b|\b(?:section|chapter)[- ]by[- ](?:section|chapter)\b",
    re.I)
_DOC_PARTS = (r"pages?|chapters?|sections?|docs|documentation|books?|guides?|packs?|"
              r"releases?|versions?|notes|tutorials?|examples?|articles?|appendix|appendices")
_ACROSS = re.compile(
    # across (or each of) the pack's parts ("across its threads and async chapters", "each
    # of the Job task examples") or three things named in a row ("across structs, enums
    # and traits"); not across things the docs are about ("across zones", "across all
    # containers")
    rf"\b(?:across|each of) (?:[\w'-]+,? ){{0,5}}?(?:{_DOC_PARTS})\b|"
    r"\bacross [\w'-]+(?:, [\w'-]+)+,? (?:and|or) [\w'-]|\b(?:in|for|under|by) each\b|"
    r"\bin which (?:situations|places|pages|chapters|"
    r"cases|sections|contexts)\b|\bfrom (?:release|version) to (?:release|version)\b|"
    r"\bwhat changed\b|\bcompare\b|\bevery (?:supported|page|chapter|release|version|place)\b|"
    # what each of several does, said in a clause of its own: "..., and what does each
    # revisit teach?", "what does it say each time ...", "..., depending on how the
    # cluster was built?", "In how many different ways do ..."
    r"\beverywhere\b|\beach time\b|,? and (?:what|where|how) (?:does|do) each\b|"
    r",\s*depending on (?:how|which|what|whether)\b|^\s*in how many (?:different )?ways\b|"
    # the different things the docs go through: "How do the different tutorials have you
    # clean up ...?", "the logs of the different parts of a cluster" (not "a different
    # value", "for different Pods")
    r"\bthe different (?:[\w'-]+ ){0,2}?[\w'-]+[^s\W]s\b|"
    r"\bwhere (?:does|do) the (?:book|docs|documentation) (?:use|say|talk|mention|show|discuss)\b|"
    r"\bwhere in the (?:book|docs|documentation)\b|"
    # how three or more things named in a row do it: "How do Deployments, DaemonSets,
    # StatefulSets and CronJobs keep a history ...?"
    r"^\s*how\b.*\b[\w'-]+(?:, [\w'-]+(?: [\w'-]+){0,2}){2,},? (?:and|or) [\w'-]", re.I)
_PLURAL_WORD = r"[a-z][\w-]*[^su\W]s|[a-z]+ies"  # "settings", "add-ons", "policies"; not "status"
_LIST = re.compile(
    r"^\s*(?:list|name)\b(?! the\b)|\b(?:list|name) (?:all|every)\b|\bwhat are all\b|"
    r"\b(?:give|show|tell) me (?:all|every)\b|\benumerate\b|\b(?:can|could) you (?:list|name)\b|"
    r"\b(?:what|which) kinds of\b|^\s*who are the (?:[\w-]+ ){0,3}?[\w-]+[^s\W]s\b|"
    # a request for all of them: "I need to know every kubelet configuration field ...",
    # "I'd like every type the book says ...", "Give me the condition types that ..."
    r"\b(?:need|like|want) (?:to (?:know|see|find) )?(?:every|all (?:the )?)\b|"
    rf"^\s*(?:give|show|tell) me (?:the |all (?:the )?)?(?:[\w.:<>-]+ ){{0,3}}?"
    rf"(?:{_PLURAL_WORD})\b|"
    r"(?:^|,\s*)(?:what|which) (?:other |different |main )?(?:kinds|types|sorts) of\b|"
    # what the pages say about a topic, said in several places: "What does the book say
    # about the two halves of a channel ...?", "What do the docs explain about ...?"
    rf"\bwhat (?:does|do) (?:the|this) (?:{_DOC_PARTS})(?:'s?(?: [\w-]+){{1,2}})? "
    r"(?:say|explain|tell|teach|note|mention|offer)\b", re.I)
# "List/name the X ...": a list when X, the noun phrase before a clause or preposition, is
# plural ("Name the flags that ..."), not when it is one thing ("Name the feature gate that
# allows it, and the ...").
# A past participle or adjective after the plural ends its noun phrase too ("the kubectl
# commands used for debugging", "the Cargo subcommands shown in the book").
_AFTER = (r"used|shown|listed|mentioned|described|given|defined|named|covered|discussed|"
          r"documented|available|supported|provided|introduced|explained|required|needed")
_NAME_THE = re.compile(r"\b(?:list|name) the ((?:[\w.:/-]+ ){0,5}?[\w.:/-]+)"
                       r"(?= (?:that|which|who|whose|to|for|of|in|on|from|with|by|you|i|"
                       rf"we|{_AFTER})\b|\s*(?:[,.;?!]|$))", re.I)
# "Which/what" + a plural noun and a verb: "Which kubelet settings control ...". The words
# before the plural are its modifiers; but after a singular head noun ("Which Cargo
# command checks that ...", "Which priority level handles requests from ...") the "plural"
# is a verb, unless an auxiliary follows it ("Which network policy providers have ...") and
# no clause opens between them ("Which field decides when unhealthy pods may ..."),
# and "range of numbers" asks for one range. "What" asking about something else ("What
# does Kubernetes use Lease objects for?", "What happens to spawned threads") is no list.
_PLURAL = re.compile(
    r"^\s*(?:which|what) ((?:[\w.:<>-]+ ){0,5}?)(?!(?:does|happens|goes|means|has|is|"
    r"was|this|its|sets|uses|gets|runs|makes|takes|needs|looks|works)\b)"
    rf"(?P<plural>{_PLURAL_WORD}|data|criteria)"
    # more things asked for in a row: "Which functions, structs and methods does ...",
    # "Which lifecycle hooks and hook handler types can ...", "Which marker traits, and
    # which traits the compiler treats specially, does ..."
    r"(?:(?:,? (?:and|or)|,) (?:which |what )?(?:[\w.:<>'-]+ ){0,5}?[\w.:<>'-]+?,?)*?"
    r" (?:do|does|did|can|could|are|were|exist|"
    r"appear|show|should|must|may|will|have|has|create|manage|control|cover|affect|support|from|"
    r"in|of|for|that|which|does|make|let|on|under|decide|determine|allow|enable|limit|"
    rf"{_AFTER})\b", re.I)
# Or the question ends with the plural: "What are the available volume types?"
_PLURAL_END = re.compile(rf"^\s*(?:what|which) are the (?:[\w.:<>-]+ ){{0,3}}"
                         rf"(?:{_PLURAL_WORD})\s*\?\s*$", re.I)
# A preposition before "which" or "what" does not change what is asked: "In which ways can
# you set ...?" asks for ways as "Which ways ...?" does.
_LEADING = re.compile(r"^\s*(?:in|on|from|for|by|with|through|at|under|into|to)\s+"
                      r"(?=(?:which|what) (?:[\w-]+ ){0,2}"
                      rf"(?!(?:its|this|his|has|does|was|is)\b)(?:{_PLURAL_WORD})\b)", re.I)
# The same after an opening phrase ("Besides writing manifests by hand, which tools do the
# docs mention ..."), where an auxiliary must follow the plural: after a comma "what prefix
# shows that ..." is as likely a verb.
_PLURAL_LATER = re.compile(rf",\s*(?:and\s+)?(?:which|what) "
                           r"(?:(?!(?:does|do|did|is|are|was|were|it|that|this)\b)[\w.:<>-]+ )"
                           r"{0,4}?"
                           rf"(?:{_PLURAL_WORD}) "
                           r"(?:do|does|did|can|could|are|were|should|must|may|will)\b", re.I)
# A word that opens a clause between a singular head noun and the plural: the plural is
# the clause's ("Which PodDisruptionBudget field decides when unhealthy pods may ...").
_CLAUSE = re.compile(r"\b(?:when|where|that|which|who|whose|if|how|while)\b", re.I)
_AUXILIARY = re.compile(r"(?:do|does|did|can|could|are|were|should|must|may|will|have|has)$",
                        re.I)
_NOT_ASKED = re.compile(r"^(?:does|do|did|can|could|should|would|will|is|was|happens|"
                        r"happened)\b", re.I)
_SINGULAR_HEAD = re.compile(
    r"\b(?:command|subcommand|method|function|macro|file|trait|field|key|setting|flag|option|"
    r"level|controller|predicate|plugin|policy|value|variable|range|kind|sort|struct|enum|"
    r"keyword|annotation|port|crate|package|module|tool|component|feature|mode|strategy|"
    r"phase|condition|class|endpoint|object|resource|type|attribute|parameter|argument)\b"
    r"(\s+of\b)?", re.I)
# The kind of item a question asks for → entity types that are such items.
_WANTED = (
    # not "command-line", which says what kind of flag or option
    (re.compile(r"\bsub-?commands?|commands?\b(?!-line)", re.I), {"command", "tool"}),
    (re.compile(r"\bflags?|options?|arguments?\b", re.I), {"flag"}),
    (re.compile(r"\bsettings?|fields?|keys?|parameters?|attributes?\b", re.I),
     {"setting", "code"}),
    (re.compile(r"\benvironment variables?\b", re.I), {"environment_variable"}),
    (re.compile(r"\bfunctions?|methods?|macros?\b", re.I), {"function", "code"}),
    (re.compile(r"\bfiles?\b", re.I), {"file"}),
    (re.compile(r"\bversions?|releases?\b", re.I), {"version"}),
    (re.compile(r"\btraits?|types?|enums?|structs?|resources?|objects?|kinds?|"
                r"conditions?|keywords?\b", re.I), {"code", "api"}),
)

# A list question that says how many it asks for: one set, named together.
_COUNTED = re.compile(r"\b(?:(?:which|what)(?: are)?(?: the)?|(?:name|list) the) "
                      r"(?:two|three|four|five|six|seven|eight|nine|ten)\b", re.I)
# What a thing is, its name plural and bare, scoped to the pack's subject: "What are traits
# in Rust?", "What are device plugins for in Kubernetes?" ask for a definition, not for the
# traits of the book ("What are the scalar types in Rust?", with its article, is a list).
_DEFINITION = re.compile(
    r"^\s*what (?:are|is) (?!(?:the|all|some|any|its|their|these|those|other|different|"
    r"main|various|each|every)\b)(?:[\w.:<>'-]+ ){0,3}?"
    rf"(?:{_PLURAL_WORD})(?: for)? (?:in|within) [\w.:<>'-]+(?: [\w.:<>'-]+)?\s*\?\s*$", re.I)


_ASIDE = re.compile(r"\s*\([^()]*\)")
_WHICH = re.compile(r"^\s*which\b", re.I)
# Why something is so, or how many there are: one answer, whatever the plural or "each" in
# the question ("Why does the kubelet manage the hosts file for each container?").
_ONE_ANSWER = re.compile(r"^\s*(?:why|how (?:many|much))\b", re.I)
# A request to gather what several pages say ("Is it OK to use hostPath volumes? Collect what
# the storage, security and task pages say about ...", "Gather what the different pages say
# about bare Pods") asks across them, whatever the question before it asks.
_PLEASE = r"^\s*(?:(?:please|now|also|then),?\s+)?"
_GATHER = re.compile(_PLEASE + r"(?:gather|collect|pull together|compile|round up)\b[^.?!]{0,80}?"
                     rf"\b(?:{_DOC_PARTS})\b", re.I)
# A sentence of its own that asks for the list or the summary ("How do I control when the
# kubelet evicts Pods? List the eviction-related kubelet settings.", "What does Rust give you
# for reusing code? Give the main parts."); not "Name the file that ...", which as often
# asks for one thing.
_REQUESTS = (("list", re.compile(_PLEASE + r"(?:list|enumerate)\s+(?:the|all|every|each|them|"
                                 r"those|these)\b", re.I)),
             ("overview", re.compile(_PLEASE + r"(?:summari[sz]e|give (?:me )?(?:the|an?) "
                                     r"(?:main|overview|summary|rundown)\b)", re.I)))
# A question that opens as a yes-or-no one ("Can one container be confined by both ...,
# and where does each go?") asks about one thing, whatever follows.
_YES_NO = re.compile(r"^\s*(?:can|could|does|do|did|is|are|was|were|should|will|would|must|"
                     r"has|have)\b(?! (?:you|we) (?:please )?(?:list|name|give|tell|show|"
                     r"enumerate)\b)", re.I)  # "Can you list ...?" asks for a list

# "What are X ... used for?", "What are errors ... a sign of?": "what" is the object of the
# preposition that ends the question, and the plural its subject, no item asked for; so in
# "What are iterator methods that ... called?", which asks for one name.
_OBJECT_ASKED = re.compile(r"^\s*what (?:is|are|were|was)\b.*\b(?:of|for|with|to|from|about|"
                           r"on|in|by|at|into|called|named|known as)\s*\?\s*$", re.I)


def rule_kind(question: str) -> str | None:
    """"overview", "across", "list" or None (see the module docstring), read on what the
    question asks, not on the scene it sets first ("I cap object counts in each team
    namespace. Which quota ...?" asks about one thing): what a sentence of it requests
    (`requested`), else its form (`form_kind`)."""
    asked = requested(question)
    return asked if asked is not None else form_kind(question)


def form_kind(question: str) -> str | None:
    """`rule_kind` read on the question's form alone, whatever a sentence of it requests."""
    # an aside in parentheses ("Which admission controllers (admission plugins) do ...")
    # is no part of the question's form
    question = _ASIDE.sub("", asking(question))
    if _ONE_ANSWER.search(question) or _YES_NO.match(question):
        return None
    if _OVERVIEW.search(question):
        return "overview"
    if _ACROSS.search(question):
        return "across"
    question = ASIDE_FIRST.sub("", _LEADING.sub("", question))  # "Besides A and B, what ..."
    if (_COUNTED.search(question) or _OBJECT_ASKED.search(question)
            or _DEFINITION.match(question)):
        return None
    if how_to(question, commands=False):  # "How do I list all pods?": one way, no list
        return None
    if _LIST.search(question):
        return "list"
    named = _NAME_THE.search(question)
    if named and _plural(named.group(1).split()[-1]):
        return "list"
    m = _PLURAL.search(question)
    if m is None and (_PLURAL_LATER.search(question) or _PLURAL_END.search(question)):
        return "list"
    if m is None or _NOT_ASKED.match(m.group(1)):
        return None
    if any(_AUXILIARY.fullmatch(w) for w in m.group(1).split()[1:]):
        return None  # "What delivery guarantee do container hooks have?": one guarantee
    head = _SINGULAR_HEAD.search(m.group(1))
    if (head and not m.group(1)[head.end():].strip() and _WHICH.match(question)
            and _SINGULAR_HEAD.fullmatch(text_rules.singular(m.group("plural").lower()))):
        return "list"  # "Which port fields appear ...": the plural is a head noun, no verb
    if head and (head.group(1) or not _AUXILIARY.search(m.group(0))
                 or _CLAUSE.search(m.group(1)[head.end():])):
        return None
    return "list"


def requested(question: str) -> str | None:
    """"across" when one of the question's sentences asks to gather what several pages say
    (`_GATHER`), whatever else it asks; else the kind a sentence of its own after the first
    asks for in so many words ("When do ...? List the situations.": "list"; "Summarize
    what the book says.": "overview") or by its form ("...? Which fields do the docs
    describe?": "list"); else None."""
    said = text_rules.sentences(question)[1:]
    # "How do I tell Kubernetes how many Pods must stay up? Which PodDisruptionBudget fields
    # and values do the docs describe?": a list asked in a question sentence of its own
    return outright(question) or next(("list" for one in said
                                       if one.endswith("?") and form_kind(one) == "list"), None)


def outright(question: str) -> str | None:
    """What `requested` reads from a request in so many words ("Gather what the pages
    say", "List the situations.", "Summarize ..."), not from a question's form."""
    sentences = text_rules.sentences(question)
    if any(map(_GATHER.search, sentences)):
        return "across"
    said = sentences[1:]
    return next((kind for kind, pattern in _REQUESTS if any(map(pattern.search, said))), None)


def _plural(word: str) -> bool:
    return re.fullmatch(r"[a-z][\w-]*?(?:s|es)", word, re.I) is not None and not (
        word.lower().endswith("ss"))


_HEAD = re.compile(r"\b(?:which|what|list(?: all)?(?: the)?)\s+(?:other |different |main )?"
                   r"((?:kinds|types|sorts|forms) of\s+)?((?:[\w.-]+\s+){0,4}[\w.-]+)", re.I)
# Where the noun phrase asked about ends: an auxiliary, a preposition, a relative word.
_PHRASE_END = re.compile(r"^(?:do|does|did|can|could|are|is|were|was|should|must|may|will|"
                         r"have|has|in|on|of|for|from|to|with|that|which|who|by|at|besides|"
                         r"except|beyond|apart|aside|other|than)$", re.I)


def _phrase(words: list[str]) -> list[str]:
    """The words of a noun phrase asked about, up to where it ends (`_PHRASE_END`)."""
    phrase = []
    for word in words:
        if _PHRASE_END.match(word.strip(",")):
            break
        phrase.append(word)
    return phrase


def asks_several(question: str) -> bool:
    """Whether the noun phrase a list question asks about joins several kinds of thing
    ("Which Ingress path types and Ingress setups do the docs describe?", "Which functions,
    structs and methods ...")."""
    m = _HEAD.search(question)
    words = _phrase(question[m.start(2):].split()) if m else []
    return "and" in (w.lower() for w in words) or any(w.endswith(",") for w in words)


def head_number(sentence: str) -> str:
    """Whether the noun a which/what question asks for is "plural" ("Which kubelet settings
    control ...", "What kinds of volume ..."), "singular" ("Which guide does the book point
    me to ...?", "Which family of methods ...") or "none" (no noun: "What is ...?"). Its
    first three words decide: "Which feature gates ..." names gates, not a feature."""
    m, phrase = _asked_phrase(sentence)
    if m is None or not phrase:
        return "none"
    return "plural" if m.group(1) or any(_plural(w) for w in phrase[:3]) else "singular"


def _asked_phrase(text: str) -> tuple[re.Match[str] | None, list[str]]:
    """The which/what match (`_HEAD`) in `text` and the words of the noun phrase after it,
    up to where it ends (`_phrase`), trailing commas off; (None, []) without one."""
    m = _HEAD.search(text)
    return m, [w.strip(",") for w in _phrase(m.group(2).split())] if m else []


# "Which special kinds of types ...": the noun after "kinds of" is the one asked for.
_KINDS_OF = re.compile(r"^(\s*(?:which|what)\s+(?:[\w.-]+\s+){1,4}?)(?:kinds|sorts|forms) of\s+",
                       re.I)


def head_stem(question: str) -> str | None:
    """The stem of the plural noun a list question asks for: the last plural word of the
    noun phrase after which/what ("Which Kubernetes workload resources create ..." →
    "resourc"; "What kinds of containers ..." → "contain"; "Which types of Service" →
    "servic"; "Which special kinds of types ..." → "type")."""
    m = _HEAD.search(_KINDS_OF.sub(r"\1", question))
    if not m:
        return None
    phrase = _phrase(m.group(2).split())
    plural = [w for w in phrase if _plural(w)]
    if plural:
        return text_rules.stem(plural[-1].lower())
    # "Which types of Service ...": the kind of thing, written in the singular.
    return text_rules.stem(phrase[-1].lower()) if m.group(1) and phrase else None


def head_phrase(question: str) -> list[str]:
    """The words of the noun phrase a list question asks for, up to its last plural word
    ("Which kernel sysctl parameters do ..." → ["kernel", "sysctl", "parameters"]; "What
    container images ..." → ["container", "images"]); [] when it names no plural."""
    _, phrase = _asked_phrase(_KINDS_OF.sub(r"\1", question))
    plural = [k for k, w in enumerate(phrase) if _plural(w)]
    return phrase[:plural[-1] + 1] if plural else []


# The words a question names the pages with and asks what they say with ("What does the
# book point out about for loops in the various chapters ...?"): how it asks, not what about.
_SCAFFOLD = frozenset(text_rules.terms(
    "book books chapter chapters page pages docs documentation section sections guide guides "
    "tutorial tutorials say says point points mention mentions describe describes explain "
    "explains various different"))


def across_terms(question: str) -> set[str]:
    """The terms of the words that make a question an across question ("from release to
    release", "what changed", "in each", "across") and of those it names the pages and
    what they say with (`_SCAFFOLD`): how it asks, not what about."""
    return ({t for m in _ACROSS.finditer(asking(question)) for t in text_rules.terms(m.group(0))}
            | (_SCAFFOLD & set(text_rules.terms(question))))


# What a question sets aside, where it stands: "Besides CPU and memory, what ...", "...,
# besides replicas, selector and the Pod template?", or in between (whole_pack_items
# EXCEPT); not "beyond", which as often compares ("go beyond what is allowed").

_ASIDE_LAST = re.compile(rf",\s*(?:{ASIDE_WORDS})\b[^?]*", re.I)


def searched_question(question: str) -> str:
    """The question without what it sets aside, for the search its region comes from:
    "Which StatefulSet fields do the docs describe, besides replicas, selector and the Pod
    template?" otherwise finds the pages about replicas, selectors and Pod templates first.
    The question itself when nothing is set aside, or too little would be left."""
    out = _ASIDE_LAST.sub("", ASIDE_FIRST.sub("", question))
    for m in EXCEPT.finditer(out):
        if not m.group(0).lower().startswith("beyond"):
            out = out.replace(m.group(0), " ")
    out = " ".join(out.split()).replace(" ?", "?")
    return out if out != question and len(set(text_rules.terms(out))) >= 2 else question


def wanted_types(question: str) -> set[str]:
    """The entity types of the items a list question asks for (`_WANTED`), read first on the
    noun phrase it asks about (`head_phrase`: "When a cluster is set up with a configuration
    file instead of flags, which fields ..." asks for fields, not flags), then on the whole
    question; set() when it names no such kind."""
    for text in (" ".join(head_phrase(question)), question):
        for pattern, types in _WANTED:
            if text and pattern.search(text):
                return types
    return set()
