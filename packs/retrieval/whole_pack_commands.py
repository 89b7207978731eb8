"""The commands a list question's region runs (packs/retrieval/whole_pack.py gathers them as
items the graph may lack):

- `programs_asked`: the programs a question names that a code line of the region starts
  with ("rustup", "kubectl config"); `prompted_programs`: for a question about commands
  that names none, every program its code blocks run after a shell prompt;
- `command_items`: the commands code blocks run with those programs, up to their first
  argument (`$ sudo systemctl restart kubelet` → "systemctl restart kubelet");
- `subcommands_first`: the candidates named after a subcommand the question names scored
  as the best one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from packs import text as text_rules
from packs.retrieval.whole_pack_items import Sec, code_lines, scored_names

# A command line of a code block: an optional shell prompt and "sudo", then the command's
# words ("$ sudo systemctl enable --now kubelet": "systemctl enable").
_PROMPT = re.compile(r"^(?:[$#>%]\s+)?(?:sudo\s+(?:-\w+\s+)*)?")
MAX_COMMAND_WORDS = 4  # a command and its subcommands ("rustup toolchain install nightly")


def _commands(sec: Sec) -> list[list[str]]:
    """The words of each line of `sec`'s code blocks, after its shell prompt."""
    return [_PROMPT.sub("", sec.content[a:b]).split() for a, b in code_lines(sec.content)]


_PROMPTED = re.compile(r"^[$>]\s+(?:sudo\s+(?:-\w+\s+)*)?([a-z][\w.+-]*)(?=\s|$)")


def prompted_programs(by_id: dict[str, Sec], aside: set[str] = frozenset()) -> set[str]:
    """The programs the code blocks of `by_id` run after a shell prompt ("$ mkdir
    projects", "> dir /B"), lower-cased, but those whose terms a question sets aside
    (`aside`: `set_aside`)."""
    out = set()
    for sec in by_id.values():
        for a, b in code_lines(sec.content):
            m = _PROMPTED.match(sec.content[a:b])
            if m and not set(text_rules.terms(m.group(1))) & aside:
                out.add(m.group(1).lower())
    return out


def programs_asked(by_id: dict[str, Sec], question: str, aside: set[str] = frozenset()
                   ) -> set[str]:
    """The commands a question asks about, lower-cased: each word of `question` that a
    code line of the region starts with (after its shell prompt), a program ("rustup",
    "kubectl"), with the words the question writes after it while some such line goes on
    with them ("Which kubectl config subcommands ...": "kubectl config"); none of a
    program the question sets aside (`aside`, its terms: `set_aside`)."""
    words = [w.lower() for w in question.replace("`", " ").split()]
    words = [w.strip(".,;:?!()\"'") for w in words]
    asked = {w for w in words if w and not set(text_rules.terms(w)) & aside}
    asked -= text_rules.STOP_WORDS
    lines = [[w.lower() for w in line] for sec in by_id.values() for line in _commands(sec)]
    starts = {line[0] for line in lines if line}
    out = set()
    for i, w in enumerate(words):
        if w not in asked or w not in starts:
            continue
        n = 1
        while i + n < len(words) and any(line[:n + 1] == words[i:i + n + 1] for line in lines):
            n += 1
        out.add(" ".join(words[i:i + n]))
    return out


def command_items(by_id: dict[str, Sec], known: set[str], programs: set[str],
                  asked: list[str], head: str | None, idf: Callable[[str], float]
                  ) -> list[tuple[float, str, list[Sec]]]:
    """(score, name, its sections best first) of the commands that code blocks of
    `by_id` run with one of `programs` (the commands a question asks about:
    `programs_asked`; "Which rustup commands ...": `$ rustup self uninstall`) that no
    item of the graph names (`known`, lower-cased): the command's first words, up to its
    first argument (a flag, a path, a value: `kubectl rollout pause deployment/nginx` →
    "kubectl rollout pause"). Scored as `code_span_items` scores a span; the program
    alone, or what the question names in a row, is its subject."""
    at: dict[str, list[Sec]] = defaultdict(list)
    prefixes = [p.split() for p in programs]
    for sec in by_id.values():
        for words in _commands(sec):
            low = [w.lower() for w in words]
            if not any(low[:len(p)] == p for p in prefixes):
                continue
            name = []
            for w in words[:MAX_COMMAND_WORDS]:
                if not re.fullmatch(r"[A-Za-z][\w.+-]*", w) or w.startswith("-"):
                    break
                name.append(w)
            command = " ".join(name)
            if len(name) >= 2 and command.lower() not in known and sec not in at[command]:
                at[command].append(sec)
    return scored_names(at, asked, head, idf)


def subcommands_first(scored: list[tuple], programs: set[str]) -> list[tuple]:
    """`scored` with the candidates named after a command the question asks about with
    its subcommand ("kubectl config view" for "Which kubectl config subcommands ...")
    scored as the best candidate is: the graph holds every kubectl command, and the
    question asks for these."""
    prefixes = tuple(f"{p} " for p in programs if " " in p)
    top = max((x[0] for x in scored), default=0.0)
    return [(max(x[0], top) if x[1].lower().startswith(prefixes) else x[0], *x[1:])
            for x in scored] if prefixes else scored
