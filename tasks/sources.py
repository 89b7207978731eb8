"""Reading a source folder: `sources/<name>/urls.txt` and the optional `pack.toml`.

Everything a build needs to know about one pack's inputs is a `SourceConfig`. Errors name
the file (and line) and say how to fix it, so a user can act on them without reading code.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from packs.urls import REDACTED, has_userinfo, redact_secrets, strip_userinfo
from tasks.alert_config import MaxAge, NotifyTarget, OptInKind
from tasks.fetch.secret_urls import SITEMAP_LINE, strip_comment
from tasks.fetch.types import HostAuth

URLS_FILE = "urls.txt"
CONFIG_FILE = "pack.toml"
DEFAULT_EMBEDDING_MODEL = "BAAI/bge-base-en-v1.5"
DEFAULT_CLAUDE_MODEL = "claude-haiku-4-5"
EMBEDDING_MODEL_ENV = "KPACK_EMBEDDING_MODEL"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CRON_FIELD = re.compile(r"^[\d*/,\-A-Za-z?]+$")
log = logging.getLogger("kpack.sources")


class SourceError(ValueError):
    """The source folder, its urls.txt or its pack.toml is invalid; the message says how."""


class SitemapConfig(BaseModel):
    """The `[sitemap]` table of pack.toml: how `sitemap: URL` lines of urls.txt expand
    (tasks/fetch/sitemap_walk.py). Patterns are globs (`*`, `?`, `[...]`); one starting
    with `/` matches the page's path (and query), any other the whole URL."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    # Pages of a sitemap are kept when they match one of `include` (empty: all) and none
    # of `exclude`. Pages listed directly in urls.txt are never filtered.
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    # Levels of sitemap index files followed below the listed file (1: an index and the
    # sitemaps it names; 2: also indexes named by an index; 0: the listed file alone).
    max_depth: int = Field(default=2, ge=0, le=5)
    # Pages taken from all the sitemaps of the source together; the rest are left out and
    # reported (the protocol allows 50,000 a file).
    max_urls: int = Field(default=50_000, ge=1, le=1_000_000)
    # "auto": skip a page whose <lastmod> is unchanged once its host's lastmod has proved
    # trustworthy (tasks/fetch/lastmod_trust.py); "never": ask every page conditionally.
    trust_lastmod: Literal["auto", "never"] = "auto"
    # Pages a trusted lastmod would skip are asked anyway, a new random sample each build,
    # so that when recheck_lie_share of a host's pages changed without a new lastmod one is
    # asked within recheck_within_builds builds with probability recheck_confidence (0: no
    # such bound), and never fewer than recheck_share (lastmod_trust.py: recheck_rate).
    recheck_share: float = Field(default=0.02, ge=0.0, le=1.0)
    recheck_lie_share: float = Field(default=0.2, gt=0.0, le=1.0)
    recheck_within_builds: int = Field(default=2, ge=1, le=100)
    recheck_confidence: float = Field(default=0.99, ge=0.0, le=0.9999)
    # A page is asked at least this often (days since its last request) however its
    # lastmod reads.
    max_skip_days: float = Field(default=30.0, ge=0.0, le=3650.0)


class PackConfig(BaseModel):
    """The typed contents of pack.toml. Every field is optional; defaults live here.

    Types are strict (TOML has real booleans and numbers: `allow_private_hosts = "yes"`
    and `keep_builds = "3"` are refused, not guessed at) and nan / inf are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str | None = None
    description: str = ""
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    # "auto": Claude when ANTHROPIC_API_KEY is set, else the offline extractor.
    extractor: Literal["auto", "claude", "offline"] = "auto"
    extractor_model: str = DEFAULT_CLAUDE_MODEL
    extract_concurrency: int = Field(default=8, ge=1, le=64)
    # "direct": Messages API calls; "batch": the Message Batches API (half the price,
    # answers within minutes to hours: for scheduled rebuilds), falling back to direct
    # calls for whatever has not come back after batch_timeout_s.
    extract_mode: Literal["direct", "batch"] = "direct"
    batch_timeout_s: float = Field(default=3600.0, gt=0, le=86_400)
    # Section tokens one Claude request may carry: small sections share a request (each
    # answer is still cached per section). 0: one request per section.
    batch_token_budget: int = Field(default=2000, ge=0, le=100_000)
    # Later builds that ask again for a section whose answer was unusable (or whose
    # request was refused); after that it stays failed, listed with its reason, until the
    # prompt or the model changes or `kpack build --retry-failed`.
    extract_failure_retries: int = Field(default=1, ge=0, le=100)
    # Hosts the build may fetch from; empty means any public host.
    allowed_hosts: list[str] = Field(default_factory=list)
    allow_private_hosts: bool = False
    # Headers for hosts that need credentials, each value read from an environment
    # variable when the build runs ([[auth]] tables; tasks.fetch.types.HostAuth).
    auth: list[HostAuth] = Field(default_factory=list, max_length=64)
    # Query parameters whose values are secrets, besides packs.urls.SECRET_PARAMS (token,
    # key, password, X-Amz-Signature, ...): their values are never stored (parse_urls).
    secret_params: list[str] = Field(default_factory=list, max_length=256)
    fetch_concurrency: int = Field(default=8, ge=1, le=64)
    per_host_concurrency: int = Field(default=2, ge=1, le=32)
    fetch_timeout_s: float = Field(default=20.0, gt=0, le=600)
    max_page_bytes: int = Field(default=10 * 1024 * 1024, gt=0)
    # Cron expression for scheduled rebuilds (deployments/), default daily at 03:00 UTC.
    schedule: str = "0 3 * * *"
    keep_builds: int = Field(default=2, ge=1, le=100)
    # A second vector per section from its entities and key phrases (SearchOptions
    # keyword_vectors uses it). Off: it doubles embedding time and did not help on the
    # SciFact and Kubernetes benchmarks.
    keyword_vectors: bool = False
    # Every answer unit's vector, for the offline reader (the unit_vectors stage): on by
    # default; off saves its embedding time (about as many units as six times the sections)
    # and the reader then scores with its plain model.
    unit_vectors: bool = True
    # The query encoder each build carries (encoder/ in the build, sha256 in the manifest),
    # so apps query with the runtime install alone: "fp32" the ONNX export of the model;
    # "none" for teams that share one model across many packs (the manifest says so and
    # the query side loads the model by name, which needs sentence-transformers or a
    # local copy).
    # (An int8 query encoder is not offered: it moved rankings, see BENCHMARKS.md.)
    query_encoder: Literal["fp32", "none"] = "fp32"
    # Words per chunk of a long section; unset = as many as the model reads (0.55 x its
    # window in tokens). Smaller chunks give finer-grained matches and more vectors.
    chunk_words: int | None = Field(default=None, ge=32, le=4000)
    # Share of chunk_words repeated from the end of the previous chunk (whole paragraphs
    # or sentences only).
    chunk_overlap: float = Field(default=0.15, ge=0.0, le=0.5)
    # Pages per shard: fetch, split, extract and embed run as one task per shard, so a
    # shard is the unit of retries, caching and distribution. The shard count is a power
    # of two (at most 512), so a shard holds shard_pages / 2 .. shard_pages pages.
    shard_pages: int = Field(default=200, ge=1, le=100_000)
    # The publish guard (tasks/publish/guard.py): the current build stays when more than this
    # share of the new build's sections failed extraction ...
    guard_max_failed_share: float = Field(default=0.2, ge=0.0, le=1.0)
    # ... or when it lost more than this share of the current build's pages (fetch
    # failures), or of its sections or entities with the same pages. --force overrides.
    guard_max_loss_share: float = Field(default=0.5, ge=0.0, le=1.0)
    # How `sitemap: URL` lines expand: include / exclude globs, index depth, lastmod trust.
    sitemap: SitemapConfig = Field(default_factory=SitemapConfig)
    # Alerts from `kpack serve` (tasks/alert_config.py, flows/alerts.py): webhook or Slack
    # URLs (or env:NAME) told of a failed, crashed, refused, partial or stale build; a
    # published build counts as partial past this share of failed sources; opt-in kinds
    # ("published", "unchanged"); stale after max_age without a successful build (seconds,
    # or "36h", "2d"; default twice the schedule's interval).
    notify: list[NotifyTarget] = Field(default_factory=list, max_length=16)
    notify_failed_sources: float = Field(default=0.2, ge=0.0, le=1.0)
    notify_on: list[OptInKind] = Field(default_factory=list)
    max_age: MaxAge = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str | None) -> str | None:
        if v is not None and not _NAME_RE.match(v):
            raise ValueError("use letters, digits, '.', '_' or '-' (at most 64 characters)")
        return v

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, v: str) -> str:
        fields = v.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError(f"{v!r} is not a 5-field cron expression like '0 3 * * *'")
        return v


@dataclass(frozen=True)
class UrlEntry:
    """One line of urls.txt: a remote URL or a local file, with where it was written.
    `sitemap` is True for a `sitemap: URL` line (the pages it lists, not a page)."""

    url: str  # http(s) URL or file:// URL (local paths are turned into file:// URLs)
    line: int
    sitemap: bool = False


@dataclass(frozen=True)
class SourceConfig:
    name: str
    folder: Path
    urls: tuple[UrlEntry, ...]  # the pages listed directly
    config: PackConfig
    sitemaps: tuple[UrlEntry, ...] = ()  # the `sitemap:` lines, expanded at build time

    @property
    def urls_file(self) -> Path:
        return self.folder / URLS_FILE


def parse_urls(text: str, origin: Path, secret_params: tuple[str, ...] = ()) -> list[UrlEntry]:
    """Parse urls.txt text. `origin` is the file (for messages and relative paths).

    Lines: an http(s) URL, a file:// URL, or a local path (relative to the file's folder);
    `sitemap: URL` (or a local path) names a sitemap whose pages the build lists.
    `#` starts a comment (at line start or after whitespace); blank lines are ignored;
    duplicates are dropped keeping the first. Credentials in a URL (`user:password@`) are
    removed with a warning, so that no pack, log or work file ever holds them (pack.toml's
    [[auth]] passes them instead). Secret-looking query values (packs.urls.SECRET_PARAMS,
    `secret_params`) become REDACTED in the URL recorded, with a warning; the fetch still
    requests the URL as written (tasks.fetch.secret_urls). Raises SourceError naming
    file:line.
    """
    entries: list[UrlEntry] = []
    seen: set[tuple[bool, str]] = set()
    base = origin.parent
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = strip_comment(raw)
        if not line:
            continue
        where = f"{origin}:{lineno}"
        bad = next((c for c in line if unicodedata.category(c) in ("Cc", "Cf")
                    and c not in "\t"), None)
        if bad is not None:
            raise SourceError(f"{where}: control character {bad!r} in {line!r}; remove it")
        sitemap = SITEMAP_LINE.match(line)
        target = sitemap.group(1).strip() if sitemap else line
        if not target:
            raise SourceError(f"{where}: 'sitemap:' names no URL; write sitemap: "
                              "https://example.org/sitemap.xml")
        if any(c.isspace() for c in target):
            raise SourceError(f"{where}: one URL or path per line, got {line!r}")
        url = _normalise_entry(target, base, where)
        url, secret = redact_secrets(url, secret_params)
        if secret:
            log.warning("%s: %s in %s looks like a secret: the pack records this URL with "
                        "%s in its place and the build requests it as written in %s; a "
                        "secret kept in urls.txt is in plain text there (a header from an "
                        "environment variable, [[auth]] in %s, keeps it out of files)",
                        where, ", ".join(f"?{n}=" for n in secret), url, REDACTED,
                        origin.name, CONFIG_FILE)
        if (sitemap is not None, url) not in seen:
            seen.add((sitemap is not None, url))
            entries.append(UrlEntry(url=url, line=lineno, sitemap=sitemap is not None))
    return entries


def _normalise_entry(line: str, base: Path, where: str) -> str:
    try:
        parts = urlsplit(line)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise SourceError(f"{where}: {strip_userinfo(line)!r} is not a valid URL ({exc})"
                          ) from exc
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise SourceError(f"{where}: URL {strip_userinfo(line)!r} has no host")
        if has_userinfo(line):
            line = strip_userinfo(line)
            log.warning("%s: removed the user name and password from %s: a pack never "
                        "stores credentials; give the site a header from an environment "
                        "variable with [[auth]] in %s", where, line, CONFIG_FILE)
        return line
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise SourceError(
                f"{where}: file URL {line!r} must hold an absolute path (file:///abs/path)"
            )
        return _local_file(Path(unquote(parts.path)), line, where)
    if scheme and len(scheme) > 1:  # one letter would be a Windows drive
        raise SourceError(
            f"{where}: unsupported scheme {scheme!r} in {strip_userinfo(line)!r}; use "
            "http(s)://, file:// "
            "or a local path"
        )
    path = Path(os.path.expanduser(line))
    return _local_file(path if path.is_absolute() else base / path, line, where)


def _local_file(path: Path, line: str, where: str) -> str:
    path = path.resolve()
    if not path.exists():
        raise SourceError(f"{where}: local file {line!r} does not exist (looked at {path})")
    if path.is_dir():
        raise SourceError(f"{where}: {line!r} is a folder; list its files one per line")
    return path.as_uri()


def load_config(path: Path) -> PackConfig:
    """Read pack.toml; a missing file gives the defaults."""
    if not path.exists():
        return PackConfig()
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SourceError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return PackConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            line = _line_of(text, [str(k) for k in err["loc"] if isinstance(k, str)])
            field = ".".join(str(p) for p in err["loc"]) or "(top)"
            problems.append(f"{path}:{line}: {field}: {_describe(err)}" if line
                            else f"{path}: {field}: {_describe(err)}")
        raise SourceError("; ".join(problems)) from exc


def _line_of(text: str, keys: list[str]) -> int | None:
    """The line where a key of a TOML document is set, if it can be found: a top-level
    key, or (["sitemap", "include"]) a key of a table, looked for after the table's
    header (`[sitemap]`) or as a dotted key (`sitemap.include = ...`)."""
    if not keys:
        return None
    lines = text.splitlines()
    key = re.escape(keys[-1])
    if len(keys) > 1:
        dotted = re.compile(rf"^\s*{re.escape(keys[0])}\.{key}\s*=")
        header = re.compile(rf"^\s*\[\s*{re.escape(keys[0])}\s*\]")
        start = next((n for n, line in enumerate(lines) if header.match(line)), None)
        for n, line in enumerate(lines, start=1):
            if dotted.match(line):
                return n
        if start is None:
            return _line_of(text, keys[:1])
        lines = lines[start + 1:]
        offset = start + 1
    else:
        offset = 0
    pattern = re.compile(rf"^\s*[\"']?{key}[\"']?\s*=")
    for n, line in enumerate(lines, start=offset + 1):
        if line.lstrip().startswith("[") and offset:
            break  # the next table: the key is not set in this one
        if pattern.match(line):
            return n
    return None


def _describe(err: dict) -> str:
    """A pydantic error as advice: the value given and what would be accepted."""
    msg = err["msg"]
    if err["loc"][:1] == ("notify",):  # the value may hold a webhook's secret
        return msg.removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        model = SitemapConfig if err["loc"][:1] == ("sitemap",) else PackConfig
        return f"unknown field; the fields are {', '.join(sorted(model.model_fields))}"
    value = err.get("input")
    if err["type"] in ("bool_type", "int_type", "float_type", "string_type", "list_type"):
        want = err["type"].split("_")[0].replace("bool", "true or false").replace(
            "int", "a whole number").replace("float", "a number").replace(
            "string", "a quoted string").replace("list", "a list like [\"a\", \"b\"]")
        return f"{value!r} is not {want}"
    return f"{msg} (got {value!r})" if "input" in err else msg


def load_source(folder: Path | str) -> SourceConfig:
    """Load a source folder. Raises SourceError for a missing folder or invalid input."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SourceError(
            f"unknown source {str(folder)!r}: expected a folder holding {URLS_FILE} "
            "(e.g. sources/example)"
        )
    urls_path = folder / URLS_FILE
    if not urls_path.is_file():
        raise SourceError(f"{folder}: no {URLS_FILE}; write one URL or local path per line")
    config = load_config(folder / CONFIG_FILE)
    raw = urls_path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SourceError(f"{urls_path}:{line}: not UTF-8 text (byte {exc.start}); save the "
                          "file as UTF-8") from exc
    entries = parse_urls(text.removeprefix("\ufeff"), urls_path, tuple(config.secret_params))
    if not entries:
        raise SourceError(f"{urls_path}: lists no URLs")
    name = config.name or folder.resolve().name
    if not _NAME_RE.match(name):
        raise SourceError(
            f"{folder}: {name!r} is not a usable pack name; set name = \"...\" in {CONFIG_FILE}"
        )
    return SourceConfig(name=name, folder=folder.resolve(), config=config,
                        urls=tuple(e for e in entries if not e.sitemap),
                        sitemaps=tuple(e for e in entries if e.sitemap))


def resolve_embedding_model(config: PackConfig, override: str | None = None) -> str:
    """The embedding model to build with: CLI flag, then $KPACK_EMBEDDING_MODEL, then pack.toml."""
    return override or os.environ.get(EMBEDDING_MODEL_ENV) or config.embedding_model
