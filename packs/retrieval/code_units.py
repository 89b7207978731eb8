"""What a code unit is, for the reader (packs/retrieval/reader_features.py): a program's
output, or a command a reader types. A how-to question wants the command; the output
that a tutorial prints after it often echoes the question's own words ("rolled back",
"drained") and would otherwise outrank it.

    is_output   code (or a lead-in with code) that the text just before it, or its
                lead-in, says is output ("The output is similar to this:", "the command
                returns:")
    is_command  code whose first line (comments and a "$ " prompt aside) is a program
                name followed by plain arguments: subcommands, flags, paths, placeholders
                ("kubectl rollout undo deployment/x --to-revision=2", "cargo build
                --release"); not a program's statement ("let x = 5;", "fn main() {"),
                YAML ("effect: NoExecute"), nor output ("node/x cordoned", "NAME READY")
"""

from __future__ import annotations

import re

from packs.retrieval.units import Unit

_OUTPUT = re.compile(r"\boutput\b[^.\n]{0,40}(:|similar|looks like|shows)|\bshould (see|print)|"
                     r"\bprints?:|\byou (should )?see\b|\breturns?:|\bresponse (is|looks)",
                     re.I)
_ARG = r"(?:-{1,2}[\w-]+(?:=\S+)?|[a-z<\[$.~/][\w.:/<>\[\]{}=@*~$-]*)"
_COMMAND = re.compile(rf"^(?:\$\s+)?[a-z][a-z0-9_-]*(?:[ \t]+{_ARG})+[ \t]*\\?$")
_COMMENT = ("#", "//")


def is_output(content: str, u: Unit) -> bool:
    """Whether unit u of section text `content` is a program's output."""
    if u.kind == "leadin" and u.inner == "code":
        return _OUTPUT.search(u.display.split("\n", 1)[0]) is not None
    if u.kind != "code":
        return False
    before = content[max(0, u.start - 200):u.start].rstrip()
    head, _, fence = before.rpartition("\n")
    if fence.lstrip().startswith(("```", "~~~")):
        before = head.rstrip()  # less the block's opening fence
    return _OUTPUT.search(before.rsplit("\n\n", 1)[-1]) is not None  # the paragraph before


def code_text(u: Unit) -> str:
    """The code a unit shows: a code unit's text, a lead-in's code block, else ''."""
    if u.kind == "code":
        return u.display
    if u.kind == "leadin" and u.inner == "code":
        return u.display.split("\n", 1)[1] if "\n" in u.display else ""
    return ""


def is_command(u: Unit) -> bool:
    """Whether unit u's code is a command line (see the module docstring)."""
    for line in code_text(u).split("\n"):
        line = line.strip().strip("`").strip()
        if not line or line.startswith(_COMMENT) or line.startswith(("```", "~~~")):
            continue
        return _COMMAND.match(line) is not None
    return False
