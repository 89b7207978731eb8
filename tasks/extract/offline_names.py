"""Which strings the offline extractor keeps as entity names, and what type each is.

`code_entity(span, sentence, section)` judges a code span or an identifier found in prose:
it returns (name, type) or None for a stop-entity. `heading_entity(heading, text)` judges
a heading: a heading is an entity only when it is a noun phrase naming one thing and the
section's own text names it too. Rules, in order (measured on the hand-labelled samples of
benchmarks/data/graph_labels, whose failure classes they are named after):

- **literal**: booleans, null words, numbers and quantities ("32Gi", "8080", "~1"), quoted
  strings, program output;
- **host**: URLs and bare host names ("github.com"); a path after a host (a label key such as
  `node.kubernetes.io/not-ready`) is kept;
- **extension**: a file extension alone (".yaml");
- **example value**: an expression or statement (`s.len()`, `Some(&x)`, `if let ...`), a
  setting written with its value (`privileged: true`, `.spec.completions = 1`: the setting
  alone is kept), a placeholder (`<name>`, `my-pod`, `example.com/x`, `foo`), a one- or
  two-letter name; and, pack-wide (`bound_names`, applied by the resolve stage), a name the
  pages' code binds or uses as a value (`name: pod-e`, `let guess`);
- **generic**: a plain word that names nothing ("Here", "Note", "data", "Example").

The type of a kept identifier (the rest are "code"): `flag` (`--grace-period`, `-n`),
`environment_variable` (an upper-case name the section treats as one: `export X`, `$X`,
"environment variable"), `function` (`Type::name`, `name()`), `setting` (a dotted field
path: `.spec.replicas`, `spec.hostPID`, `net.ipv4.ip_forward`), `file` (a path or a file
name with a known extension), `version` (`v1.30`, "1.30.0" where the sentence speaks of a
release), `command` (a program and its subcommand: `kubectl get`, `cargo test`).
"""

from __future__ import annotations

import functools
import re

GENERIC_WORDS = frozenset("""
here there this that these those it its above below following example examples note notes
warning caution tip important info data value values default true false null none nil yes
no ok on off item items thing things name names type types field fields key keys option
options setting settings file files command commands step steps output input result results
error errors overview introduction summary conclusion next previous see also more less
other others one two three first second last new old all any some each every true false
hello world foo bar baz qux test tests todo fixme string number integer list object
""".split())

# Words a heading that names a task, not a thing, starts with ("Create a Pod", "Using X").
_TASK_VERBS = frozenset("""
add adding allow apply assign avoid back build building change check choose clean configure
configuring connect control convert create creating debug declare define defining delete
deploy deploying disable enable encrypt decrypt expose extend find fix generate get getting
give handle handling implement implementing improve install installing introduce keep learn
let limit list make making manage managing migrate monitor move moving prepare prevent
protect provide read refer remove removing replace reserve restrict retrieve return run
running schedule scheduling see select set setting setup share sharing specify start stop
store storing switch test testing troubleshoot try turn understand understanding update
updating upgrade upgrading use using validate verify view write writing working why what
how when where which who is are can do does should will
""".split())
# Head nouns of headings that fit any software ("Cloud provider integrations").
_GENERIC_HEADS = frozenset("""patterns integrations considerations guidelines tips
recommendations limitations examples options methods ways approaches strategies practices
steps details notes issues concerns scenarios alternatives basics fundamentals
prerequisites requirements""".split())
_QUANTIFIERS = frozenset("all some many most each every both other multiple no one two".split())
_DETERMINERS = frozenset("""a an the your our my their its this that these those with to up
out from for into on in of and or by at over multiple each every all some any""".split())
# A heading that opens with one of these, capitalised, is a phrase ("In Function Signatures");
# lower-case, a keyword may open a name ("for Loops").
_PREPOSITIONS = frozenset("""In On With For From To At By About Into Under Over Between Within
Without Using Via Through""".split())
GENERIC_HEADINGS = frozenset("""
overview|introduction|intro|example|examples|usage|summary|see also|next steps|what's next|
whats next|prerequisites|before you begin|installation|install|getting started|notes|note|
references|reference|background|details|description|contents|table of contents|faq|
conclusion|parameters|arguments|returns|return value|options|cleaning up|cleanup|clean up|
feedback|further reading|related|resources|how it works|best practices|limitations|caveats|
constraints|motivation|use cases|design|design details|api|behavior|defaulting behavior|
troubleshooting|known issues|configuration|objectives|requirements|alternatives|
implementation|setup|features|goals|non-goals|terminology|glossary|history|recap|
what you'll learn|what you will learn|before you start|things to note|caveats and limitations
""".replace("\n", "").split("|"))

_NUMERIC = re.compile(r"^[~+-]?\d[\d,._:]*\s?(?:[kKMGTPE]i?|[kmgt]b?|%|ms|s|m|h|d|x)?$")
_QUOTED = re.compile(r"^(['\"]).*\1$|^b?'.'$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^www\.", re.I)
_HOST = re.compile(r"^(?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|co|uk|de|app|cloud|info|"
                   r"edu|gov|ai|me|us|ly|run)\.?$", re.I)
_EXTENSION_ONLY = re.compile(r"^\.?[a-z0-9]{1,5}$|^\*\.[a-z0-9]{1,5}$", re.I)
# Words that name nothing whatever their case ("Here", "Below"); other generic words
# ("data", "list") are stop-entities only written in lower case (`List` is a type).
FUNCTION_WORDS = frozenset("""here there this that these those it its above below following
note notes warning caution tip important example examples hello""".split())
_PLACEHOLDER = re.compile(r"<[^<>]*\s[^<>]*>|<[a-z]+(?:-[a-z]+)+>|<[A-Z]+(?:_[A-Z]+)+>|^<[a-z-]+>$|"
                          # a path or key with a placeholder part (`count/<resource>`,
                          # `<identifier>.available`); a value compared (`memory.available<500Mi`)
                          r"(?:^|[/.])<[A-Za-z_][\w-]*>|<\d|"
                          r"^(?:my|your|some)[-_]|\bsomething\b|^TypeName$|"
                          r"\bexample\.(?:com|org|net)\b|^(?:foo|bar|baz|qux)\b|"
                          r"^(?:arg|param|value|key|var)\d*$", re.I)
_FLAG = re.compile(r"^(--?[A-Za-z][\w-]*)(?:[= ].*)?$")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^[A-Z]{2,}$")
_FUNCTION_PATH = re.compile(r"^[A-Za-z_][\w]*(?:::[A-Za-z_]\w*)+(?:!|\(\))?$")
_ATTRIBUTE = re.compile(r"^#!?\[[A-Za-z_][\w:]*(?:\([\w\s,=\"':.-]*\))?\]$")
_TABLE_HEADER = re.compile(r"^\[\[?[A-Za-z_][\w-]+(?:\.[\w<>*-]+)*\]\]?$")
_TYPE_METHOD = re.compile(r"^(?:\w+::)*[A-Z]\w*(?:<[^<>]*>)?::[a-z_][a-z0-9_]*$")
_CALL = re.compile(r"^([A-Za-z_][\w.:]*)\((.*)\)$")
_MACRO = re.compile(r"^[a-z_][a-z0-9_]*!$")
_FIELD_PATH = re.compile(r"^\.?[a-z][A-Za-z0-9]*(?:\[\])?(?:\.[A-Za-z][\w-]*(?:\[\])?)+$")
_FILE_EXT = re.compile(r"\.(?:ya?ml|json|toml|rs|md|go|py|sh|txt|conf|cfg|ini|html?|lock|"
                       r"service|sock|crt|key|pem|csr|log|xml|proto|tf|js|ts|c|h|ps1|exe|"
                       r"tar|gz|zip|env|d)$", re.I)
_PATH = re.compile(r"^(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.*@-]+)*/?$|^[\w.-]+/[\w.-]+(?:/[\w.-]+)*"
                   r"\.[a-z]{1,5}$")
_VERSION = re.compile(r"^v?\d+\.\d+(?:\.\d+)?(?:-[\w.]+)?$")
_RELEASE_WORDS = re.compile(r"\b(?:version|release|releases|since|added in|introduced|"
                            r"deprecated|removed|stable|beta|alpha|graduated|as of|upgrade)\b",
                            re.I)
_ENV_CONTEXT = re.compile(r"environment variable|\benv(?:ironment)?\b|\bexport\s+[A-Z]", re.I)
_CODE_NOISE = re.compile(r"[;{}=]|\s(?:==|!=|=>|->|&&|\|\||<=|>=|\+|\*|/)\s|^(?:if|else|let|"
                         r"for|while|match|return|fn|pub|use|mod|impl|struct|enum|trait|type|"
                         r"const|static|async|await|unsafe|where|loop|def|class|import|from|"
                         r"var|function|echo|print|println!?)\b")
_SETTING_VALUE = re.compile(r"^\"?(\.?[A-Za-z][\w.\[\]/-]*)\"?\s*(?::\s|=|==)\s*\S")
_SHELL_WORD = re.compile(r"^[a-z][a-z0-9_.-]*$")
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9-]*$")
_OUTPUT_WORDS = re.compile(r"^(?:running|compiling|finished|error|warning|test result|"
                           r"thread '|hello)\b", re.I)


# The first part of an API object's field path (`spec.replicas`, `status.phase`).
_OBJECT_ROOTS = frozenset({"spec", "status", "metadata", "data", "stringData", "template"})


def is_literal(name: str) -> bool:
    """A value rather than a name: a boolean, null, number, quantity or quoted string."""
    low = name.lower()
    return (low in ("true", "false", "null", "none", "nil", "nan", "undefined", "yes", "no")
            or bool(_NUMERIC.match(name)) or bool(_QUOTED.match(name))
            or name.endswith("\\n") or bool(_OUTPUT_WORDS.match(name)))


def is_host(name: str) -> bool:
    """A URL or a bare host name (a path after the host makes it a key, not a host)."""
    return bool(_URL.match(name) or _HOST.match(name))


def _command(name: str, section: str) -> tuple[str, str] | None:
    """(program [subcommand], "command") for a code span holding a command line, or None
    when it is code rather than a command."""
    words = name.split()
    if not words or not _SHELL_WORD.match(words[0]) or _CODE_NOISE.search(name):
        return None
    if words[0] in GENERIC_WORDS or words[0].endswith((".", ",")):
        return None
    if re.search(r"[()\[\]<>\"'`!?:&|]", name) and not re.search(r"--?\w", name):
        return None
    # Program + subcommand(s): stop at the first flag, value, path or placeholder.
    kept = [words[0]]
    for w in words[1:3]:
        if not _SUBCOMMAND.match(w) or w in ("a", "the", "to", "and", "or", "of"):
            break
        kept.append(w)
    runs = re.search(rf"(?m)^\s*(?:[$#>]\s*|sudo\s+)?{re.escape(words[0])}\s", section)
    if not runs and (len(kept) == 1 or not re.search(r"\s--?\w", name)):
        return None  # a command only when the page runs it, or when it is given flags
    return " ".join(kept), "command"


def code_entity(span: str, sentence: str = "", section: str = "") -> tuple[str, str] | None:
    """(name, type) for a code span or an identifier from prose, or None for a
    stop-entity (see the module docstring). `sentence`: the sentence it is in; `section`:
    the section's text (to tell an environment variable or a command by its use)."""
    found = _judge(span.strip().strip("`").strip())
    if found is None or found[1] not in _IN_CONTEXT:
        return found
    name, kind = found
    if kind == "?command":
        return _command(name, section)
    if kind == "?version":
        return (name, "version") if _RELEASE_WORDS.search(sentence) else None
    if ("$" + name) in section or _ENV_CONTEXT.search(sentence):  # "?env"
        return name, "environment_variable"
    return name, "code"


_IN_CONTEXT = frozenset({"?command", "?version", "?env"})


@functools.lru_cache(maxsize=65536)  # the same names recur across a pack's sections
def _judge(name: str) -> tuple[str, str] | None:
    """`code_entity` on the name alone: a final (name, type), None, or (name, "?kind")
    when its sentence or section decides (a command, a version, an environment
    variable)."""
    if name.endswith(("…", "...", ":", "..")) or re.match(r"^(?:\*|\.\.)[a-z_]", name):
        return None  # cut short ("start..", "k8s:enc:kms:v2:") or an expression (`*y`, `..a`)
    if len(name) < 2 or len(name) > 80 or not any(c.isalpha() for c in name):
        return None
    if is_literal(name) or is_host(name) or _EXTENSION_ONLY.match(name) and "." in name:
        return None
    if ((name.islower() and name in GENERIC_WORDS) or name.lower() in FUNCTION_WORDS
            or _PLACEHOLDER.search(name)):
        return None
    if _ATTRIBUTE.match(name) or _TABLE_HEADER.match(name):
        return name, "code"  # `#[test]`, `#[cfg(test)]`; `[profile.release]`, `[[bin]]`
    flag = _FLAG.match(name)
    if flag and " " not in flag.group(1):
        return flag.group(1), "flag"
    setting = _SETTING_VALUE.match(name)
    if setting and " " not in name.split(":")[0].strip():
        key = setting.group(1)
        return (key, "setting") if _FIELD_PATH.match(key) or len(key) > 3 else None
    if " " in name:
        return name, "?command"
    if _FUNCTION_PATH.match(name):
        # A path is a function when written as a call or as `Type::method`; a module, a
        # trait, a type or a variant (`std::io`, `std::io::Write`, `Poll::Pending`) is code.
        # A macro (`std::println!`) is code, as the labels' criteria read it.
        called = name.endswith("()") or bool(_TYPE_METHOD.match(name))
        return name.removesuffix("()"), ("function" if called else "code")
    call = _CALL.match(name)
    if call:
        callee = call.group(1)
        if call.group(2).strip() or re.match(r"^[a-z_]\w*\.", callee):
            return None  # an expression: arguments, or a method called on a value
        return callee, "function"
    if _MACRO.match(name):
        return name, "code"  # a macro (`println!`) is no function
    if _VERSION.match(name):
        return name, "?version"
    if re.match(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)+/\S", name):
        return name, "code"  # a key under a domain (`kubernetes.io/ingress.class`), no file
    if _PATH.match(name) or (_FILE_EXT.search(name) and re.match(r"^[\w./@-]+$", name)):
        return name, "file"
    if _FIELD_PATH.match(name):
        # `s.len`, `config.ignore_case`: a variable's member in an example, unless the path
        # is long or starts with a dot (a field of an object's spec).
        return (name, "setting") if (name.startswith(".") or name.count(".") >= 2
                                     or re.search(r"\.[a-z]+[A-Z]", name)
                                     or name.split(".")[0] in _OBJECT_ROOTS) else None
    if _ENV_NAME.match(name):
        return name, "?env"
    if re.fullmatch(r"'[a-z]\w*", name):
        return name, "code"  # a lifetime ('a, 'static)
    if re.fullmatch(r"[a-z]{1,2}|_\w?", name):
        return None
    if re.search(r"[(){}\[\]=;]|\s", name) and not re.fullmatch(r"[\w:<>&'\[\], ]+", name):
        return None
    return name, "code"


_BOUND = re.compile(
    r"(?m)^[ \t-]*[\"']?[\w.-]+[\"']?:[ \t]+[\"']?([\w./:@-]{2,80}?)[\"']?,?[ \t]*$|"
    r"\blet\s+(?:mut\s+)?([a-z_][a-z0-9_]*)\b|\bfor\s+\(?([a-z_][a-z0-9_]*)\b[^\n]*?\bin\b|"
    r"\s-f\s+(?:\S*/)?([\w.-]+\.ya?ml)\b|\|([a-z_][a-z0-9_]*)\||"
    r"\b(?:--)?name[= ][\"']?([\w.-]{2,80})")


def bound_names(code: str) -> set[str]:
    """Names a page's code binds or uses as values (`name: pod-e`, `path: /etc/x`,
    `let guess`, `for item in`, `-f my-pod.yaml`): examples' own names, which the offline
    extractor leaves out wherever the pack mentions them (resolve reads every section's
    code: the example and the prose naming it may be in different chunks)."""
    out = set()
    for m in _BOUND.finditer(code):
        value = next((g for g in m.groups() if g), "")
        if value and not is_literal(value) and value.lower() not in GENERIC_WORDS:
            out.add(value)
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][\w'-]*", text.lower())


def _fold(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def heading_entity(heading: str, text: str, title: bool = False) -> str | None:
    """The heading as an entity name when it is a noun phrase naming one thing that the
    section's text names too (`text`: its prose, lower-cased or not); None for a task,
    a question, a list of topics, a generic heading or a heading the text never names.
    `title`: the heading is a page's title, which may be one plain word ("Kettles")."""
    name = heading.strip().strip("#").strip().rstrip(":").strip()
    if not name or len(name) > 60 or name.lower() in GENERIC_HEADINGS:
        return None
    if re.search(r"[?!:;,()\"“”]|\.\s|\s(?:and|or|vs\.?|versus)\s", name):
        return None
    words = _words(name)
    if not words or len(words) > 5 or words[0] in _TASK_VERBS:
        return None
    if name.split()[0] in _PREPOSITIONS:
        return None  # "In Struct Definitions", "Using Trait Objects": a phrase, no name
    if words[0].endswith("ing") and (len(words) == 1 or words[1] in _DETERMINERS):
        return None  # "Creating a Deployment", "Backing up an etcd cluster"
    if len(words) == 1 and name[:1].isupper() and name[1:].islower() and not title:
        return None  # a plain capitalised heading ("Runtime", "Constraints") names nothing
    if words[0] in _QUANTIFIERS or (len(words) > 1 and words[-1] in _GENERIC_HEADS):
        return None  # "Common usage patterns", "Cloud provider integrations"
    folded = " ".join(_fold(w) for w in words if w not in ("the", "a", "an"))
    prose = " ".join(_fold(w) for w in _words(text))
    if folded and re.search(rf"(?<![\w-]){re.escape(folded)}(?![\w-])", prose):
        return name
    return None


# Shell utilities whose lines in a code block say nothing about the pack's own tools.
_SHELL_UTILITIES = frozenset("""cd ls echo cat export source sudo mkdir rm cp mv curl wget
grep sed awk chmod chown tar touch set unset printf read sleep kill ps env which man less
head tail sort uniq wc xargs tee find test true false exit git apt yum dnf brew pip npm
python python3 bash sh zsh fish powershell docker""".split())
_PROMPT = re.compile(r"^\s*(?:\$|#|>|PS[^>]*>)\s+")


def run_commands(code: str, prose: str) -> list[str]:
    """The commands a shell block runs (`code`: its text) with the program and up to two
    subcommands (`kubeadm token create`, `kubectl completion bash`, `cargo update`), for
    programs the section's prose names (`prose`, lower-cased or not): `$ cargo new
    hello_cargo` gives `cargo new`; a value, path, flag or placeholder ends the command."""
    named = set(re.findall(r"[a-z][a-z0-9-]{2,}", prose.lower()))
    bound = bound_names(code)
    out: list[str] = []
    for line in code.splitlines():
        line = _PROMPT.sub("", line)
        for m in re.finditer(r"(?<![\w./-])([a-z][a-z0-9-]{2,})((?:[ \t]+[a-z][a-z0-9-]*){1,2})",
                             line):
            program = m.group(1)
            if program not in named or program in _SHELL_UTILITIES or program in GENERIC_WORDS:
                continue
            words = [program]
            for w in m.group(2).split():
                if (w in bound or any(c.isdigit() for c in w) or w in _DETERMINERS
                        or _PLACEHOLDER.search(w) or len(words) > 1 and w in GENERIC_WORDS):
                    break
                words.append(w)
            if len(words) > 1:
                out.append(" ".join(words))
    return list(dict.fromkeys(out))
