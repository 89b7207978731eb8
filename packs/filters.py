"""Query filters: which sections a search may return, and the analyzer's suggestions.

Three filters, each optional (`SearchOptions.url_prefix`, `.content_kind`, `.language`):

- **url_prefix**: a full URL prefix (``https://kubernetes.io/docs/tasks/``) matches the
  section's URL from its start; a path prefix (``/docs/tasks/``; a leading ``/`` is added
  when missing) matches the URL's path from its start, whatever the scheme and host.
- **content_kind**: ``"code"`` keeps sections whose words are mostly inside code fences
  (`Section.is_code`, decided at build time by tasks.sections), ``"prose"`` the others.
- **language**: a *programming* language of the section's fenced code blocks, from the
  fence info string (```` ```yaml ````), normalised by `normalise_language` (``py`` →
  ``python``, ``sh``/``bash``/``console`` → ``shell``, ``yml`` → ``yaml``, ...). Format-2
  packs store the languages per section (`Section.languages`, computed at build time);
  format-1 packs are matched with a regular expression on the fence lines instead. Natural
  language is not a filter: a pack is built from one documentation set, in one language.

Filters are applied inside the database queries (a Cypher WHERE on the candidate scans,
see packs.db), so they narrow the candidates *before* fusion and truncation, never after.

`suggest(question, ...)` is the analyzer's side: it proposes filters the question implies
("in the tasks docs", "show me a code example", "in Python"), checked against what the
pack holds (its URL paths and code languages), so a suggestion never names something the
pack does not have. Suggestions are reported in `SearchResult.analysis["suggested_filters"]`
and applied only with `auto_filters=True`; explicit options always win.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from packs import markdown

CONTENT_KINDS = ("code", "prose")

LANGUAGE_ALIASES: dict[str, str] = {
    "py": "python", "python3": "python", "py3": "python", "ipython": "python",
    "golang": "go",
    "sh": "shell", "bash": "shell", "zsh": "shell", "console": "shell", "shell-session": "shell",
    "shellsession": "shell", "terminal": "shell", "cmd": "shell",
    "yml": "yaml", "js": "javascript", "node": "javascript", "jsx": "javascript",
    "ts": "typescript", "tsx": "typescript", "rs": "rust", "rb": "ruby", "kt": "kotlin",
    "c++": "cpp", "cxx": "cpp", "cc": "cpp", "c#": "csharp", "cs": "csharp",
    "ps1": "powershell", "pwsh": "powershell", "tf": "hcl", "terraform": "hcl",
    "docker": "dockerfile", "jsonc": "json", "json5": "json", "htm": "html",
    "postgres": "sql", "postgresql": "sql", "mysql": "sql", "sqlite": "sql",
}
# Names a question may use for a language (besides the canonical names themselves).
_QUESTION_NAMES: dict[str, str] = {
    "python": "python", "golang": "go", "bash": "shell", "shell": "shell", "zsh": "shell",
    "yaml": "yaml", "yml": "yaml", "json": "json", "javascript": "javascript",
    "typescript": "typescript", "java": "java", "rust": "rust", "ruby": "ruby",
    "kotlin": "kotlin", "c++": "cpp", "c#": "csharp", "powershell": "powershell",
    "terraform": "hcl", "hcl": "hcl", "dockerfile": "dockerfile", "sql": "sql",
    "toml": "toml", "html": "html", "xml": "xml", "php": "php", "swift": "swift",
    "scala": "scala",
}
# Not packs/text.py's words: a language name keeps "+" and "#" ("C++", "C#") and a file
# name's extension counts alone ("pod.yaml" asks for YAML); only this lookup reads it.
_QUESTION_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#]*")


def normalise_language(name: str) -> str:
    """Canonical lower-case language name of a fence info word or a user's value."""
    key = name.strip().lower().lstrip(".")
    return LANGUAGE_ALIASES.get(key, key)


def fence_languages(text: str) -> list[str]:
    """Languages named on the opening lines of the text's code fences, in order, deduplicated.

    Only the first word of the info string counts (```` ```yaml title="pod.yaml" ```` →
    yaml). A fence without an info string names no language. The fences are read by
    `packs.markdown`, so a fence-like line inside a code block names nothing.
    """
    found: dict[str, None] = {}
    for word in markdown.fence_languages(text or ""):
        lang = normalise_language(word)
        if lang and not lang[0].isdigit():
            found.setdefault(lang, None)
    return list(found)


def fence_regex(language: str) -> str:
    """An RE2 pattern matching a fence opener of `language` or one of its aliases (for packs
    of format 1, which store no `languages` column)."""
    lang = normalise_language(language)
    names = sorted({lang, *(a for a, c in LANGUAGE_ALIASES.items() if c == lang)})
    alt = "|".join(re.escape(n) for n in names)
    return "(?im)" + markdown.fence_opener_pattern(alt)


@dataclass(frozen=True)
class Filters:
    """The filters of one search (all None: no filtering)."""

    url_prefix: str | None = None
    content_kind: str | None = None
    language: str | None = None

    def __bool__(self) -> bool:
        return any((self.url_prefix, self.content_kind, self.language))

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("url_prefix", self.url_prefix),
                                  ("content_kind", self.content_kind),
                                  ("language", self.language)) if v}


def validate(url_prefix: str | None, content_kind: str | None,
             language: str | None) -> tuple[str | None, str | None, str | None]:
    """Normalised filter values; ValueError says what is wrong with one."""
    if url_prefix is not None:
        url_prefix = url_prefix.strip()
        if not url_prefix:
            url_prefix = None
        elif len(url_prefix) > 500 or any(c.isspace() for c in url_prefix):
            raise ValueError(f"url_prefix must be a URL or path prefix without spaces, "
                             f"got {url_prefix[:80]!r}")
    if content_kind is not None and content_kind not in CONTENT_KINDS:
        raise ValueError(f"content_kind must be 'code', 'prose' or None, got {content_kind!r}")
    if language is not None:
        language = normalise_language(language) or None
        if language is not None and not re.fullmatch(r"[a-z0-9_+#.-]{1,40}", language):
            raise ValueError(f"language must be a language name such as 'python', "
                             f"got {language!r}")
    return url_prefix, content_kind, language


def is_url(prefix: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", prefix))


def path_regex(path_prefix: str) -> str:
    """An RE2 pattern matching URLs whose path starts with `path_prefix`."""
    path = path_prefix if path_prefix.startswith("/") else "/" + path_prefix
    return "^[A-Za-z][A-Za-z0-9+.-]*://[^/]*" + re.escape(path)


def where(filters: Filters, has_languages: bool, var: str = "s") -> tuple[str, dict]:
    """(Cypher boolean expression, parameters) for the filters on section variable `var`.

    Built from constant fragments only; every user value is a parameter. "true" when no
    filter is set.
    """
    parts, params = [], {}
    if filters.url_prefix:
        if is_url(filters.url_prefix):
            parts.append(f"{var}.url STARTS WITH $f_url")
            params["f_url"] = filters.url_prefix
        else:
            parts.append(f"regexp_matches({var}.url, $f_path)")
            params["f_path"] = path_regex(filters.url_prefix)
    if filters.content_kind:
        parts.append(f"{var}.is_code = $f_code")
        params["f_code"] = filters.content_kind == "code"
    if filters.language:
        if has_languages:
            parts.append(f"list_contains({var}.languages, $f_lang)")
            params["f_lang"] = filters.language
        else:
            parts.append(f"regexp_matches({var}.content, $f_fence)")
            params["f_fence"] = fence_regex(filters.language)
    return (" AND ".join(parts) or "true"), params


# --- the analyzer's suggestions ----------------------------------------------------------

_SCOPE = re.compile(
    r"\b(?:in|from|under|within|inside|among)\s+(?:the\s+)?([a-z0-9][\w-]*(?:[ /][a-z0-9][\w-]*)?)"
    r"\s+(?:docs|documentation|section|sections|pages|page|guides?|folder|directory|area)\b",
    re.I)
_EXPLICIT_PATH = re.compile(r"(?:^|\s)(?:under|in|from)\s+(/[\w./-]+)", re.I)
_CODE = re.compile(
    r"\b(?:code|yaml|json|config(?:uration)? file|manifest)\s+(?:example|examples|sample|samples|"
    r"snippet|snippets)\b|\b(?:example|sample)\s+(?:code|manifest|yaml|config)\b|\bsnippets?\b"
    r"|\bshow me the (?:code|yaml|manifest)\b", re.I)
_PROSE = re.compile(r"\b(?:without code|no code|in prose|prose only)\b", re.I)


def path_prefixes(urls: Iterable[str]) -> Counter:
    """Every directory prefix of the URLs' paths ('/docs/', '/docs/tasks/', ...) → count."""
    counts: Counter = Counter()
    for url in urls:
        segs = [s for s in urlsplit(url).path.split("/") if s]
        for i in range(1, len(segs)):
            counts["/" + "/".join(segs[:i]) + "/"] += 1
    return counts


def _match_scope(name: str, prefixes: Counter) -> str | None:
    slug = re.sub(r"[\s_]+", "-", name.strip().lower()).strip("/")
    wanted = {slug, slug.rstrip("s"), slug + "s"}
    best: tuple[int, int, str] | None = None
    for prefix, n in prefixes.items():
        last = prefix.rstrip("/").rsplit("/", 1)[-1].lower()
        if last in wanted or prefix.strip("/").lower() == slug:
            # The most-populated prefix wins; the shorter one on ties.
            cand = (n, -len(prefix), prefix)
            best = max(best, cand) if best else cand
    return best[2] if best else None


def suggest(question: str, prefixes: Counter, languages: Iterable[str]) -> Filters:
    """Filters the question implies that the pack can satisfy (see module docstring)."""
    url_prefix = None
    m = _EXPLICIT_PATH.search(question)
    if m and any(p.startswith(m.group(1).rstrip("/") + "/") for p in prefixes):
        url_prefix = m.group(1).rstrip("/") + "/"
    if url_prefix is None:
        for m in _SCOPE.finditer(question):
            url_prefix = _match_scope(m.group(1), prefixes)
            if url_prefix:
                break
    kind = "code" if _CODE.search(question) else ("prose" if _PROSE.search(question) else None)
    known = set(languages)
    language = None
    for word in _QUESTION_WORD.findall(question):
        lang = _QUESTION_NAMES.get(word.lower())
        if lang is None and word == "Go":  # "go" is an English verb; "Go" mid-question is not
            lang = "go"
        if lang and lang in known:
            language = lang
            break
    return Filters(url_prefix, kind, language)
