"""manifest.json: what a pack is, how it was built, and how to query it.

The build writes a `Manifest`; readers load it with `read_manifest`, which checks the
format version before anything else is trusted.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from packs.format import FORMAT_VERSION, MANIFEST_FILE, PackFormatError, check_format


class SourceRecord(BaseModel):
    """One line of urls.txt and what fetching it gave."""

    url: str
    status: str  # "ok", "not_modified", "failed", "skipped", "unsupported", "disallowed"
    http_status: int | None = None
    final_url: str | None = None
    content_type: str | None = None
    content_hash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    error: str | None = None
    # The page's <lastmod> in its sitemap this build (None when it has none or was listed
    # directly), and what the rebuild did with it (PageOutcomes' names but "removed").
    sitemap_lastmod: str | None = None
    outcome: str | None = None


class EmbeddingInfo(BaseModel):
    model: str  # canonical model id (e.g. "BAAI/bge-base-en-v1.5"), never a local path
    dim: int
    normalized: bool = True
    query_prefix: str = ""
    document_prefix: str = ""
    max_seq_length: int = 512
    # Confidence gate: best cosine similarity below this → answer without pack context.
    gate_threshold: float = 0.5


class KeywordVectorsInfo(BaseModel):
    """The optional second vector per section (format 2): its entities and key phrases
    embedded with the pack's model. Absent (present=False) in format-1 packs and in builds
    made without it; readers then search the content vector alone."""

    present: bool = False
    dim: int = 0
    version: str = ""  # the keyword-text recipe (tasks.vectors.KEYWORD_VERSION)


class EncoderFile(BaseModel):
    sha256: str
    bytes: int


class EncoderInfo(BaseModel):
    """The query encoder the build carries in `encoder/` (see packs/encoder.py): the ONNX
    export of the embedding model and its tokenizer, so the pack answers with exactly the
    model that embedded it on a machine with no model hub, no cache and no torch.

    `present` is False when pack.toml opts out (`query_encoder = "none"`, for teams that
    share one model across packs), when the model does not fit the ONNX recipe, and in
    packs built before encoders were shipped; `reason` says which."""

    present: bool = False
    runtime: str = ""  # "onnxruntime"
    precision: str = ""  # "fp32"
    pooling: str = ""  # "mean" or "cls"
    max_seq_length: int = 0
    files: dict[str, EncoderFile] = Field(default_factory=dict)  # path in the build → digest
    reason: str = ""


class GateInfo(BaseModel):
    """The confidence gate's parameters (packs.retrieval.gate): p = sigmoid(bias + Σ weight ·
    signal) over the named signals; a question passes when p >= cut. Calibrated per
    embedding model on dev questions (benchmarks/gate_calibration.py)."""

    version: str
    weights: dict[str, float]
    bias: float
    cut: float = 0.5
    calibration: str = ""  # what it was fitted on, or why it was not
    # The packs/text.py rules (TEXT_RULES_VERSION) the signals were read with when fitted.
    text_rules: str = ""


class ExtractorInfo(BaseModel):
    kind: str  # "claude" or "offline"
    model: str | None = None
    prompt_version: str = ""
    note: str = ""


class Counts(BaseModel):
    articles: int = 0
    sections: int = 0
    entities: int = 0
    relationships: int = 0
    facts: int = 0
    links: int = 0
    mentions: int = 0
    topics: int = 0  # communities of the entity graph (0 in packs built before topics)


class PageOutcomes(BaseModel):
    """What a build did with each page (tasks/fetch/freshness.py), counted."""

    skipped_lastmod: int = 0  # not requested: sitemap lastmod unchanged, host trusted
    not_modified: int = 0  # asked conditionally, answered 304
    unchanged: int = 0  # fetched in full, same text as the last build
    changed: int = 0  # fetched in full, other text
    new: int = 0  # not in the last build
    removed: int = 0  # in the last build, no longer listed
    failed: int = 0  # not usable this build

    def line(self) -> str:
        """`pages: 9,800 skipped by lastmod, 180 not modified (304), 20 changed` (outcomes
        with no page left out); "" when every count is 0."""
        labels = {"skipped_lastmod": "skipped by lastmod", "not_modified": "not modified (304)",
                  "unchanged": "unchanged by hash", "changed": "changed", "new": "new",
                  "removed": "removed", "failed": "failed"}
        parts = [f"{getattr(self, k):,} {label}" for k, label in labels.items()
                 if getattr(self, k)]
        return "pages: " + ", ".join(parts) if parts else ""


class SitemapFailure(BaseModel):
    url: str
    error: str | None = None


class SitemapsInfo(BaseModel):
    """The build's `sitemap:` lines, expanded (tasks/fetch/expand.py)."""

    files: int = 0  # sitemap files read (indexes included)
    ok: int = 0
    not_modified: int = 0  # asked conditionally, 304: the last build's entries kept
    failed: int = 0  # their entries from the last build kept, when there were any
    bytes: int = 0  # downloaded
    listed: int = 0  # page entries read
    filtered_out: int = 0  # by [sitemap] include / exclude
    duplicates: int = 0
    over_cap: int = 0  # past [sitemap] max_urls
    pages: int = 0  # kept: the sitemap pages of the build
    failures: list[SitemapFailure] = Field(default_factory=list)  # the first 50
    failures_total: int = 0


class LastmodHost(BaseModel):
    """One host's sitemap lastmod as the build judged it (tasks/fetch/lastmod_trust.py)."""

    trusted: bool = False  # this build skipped pages by it
    verdict: bool = False  # the next build will
    reason: str = ""
    observations: dict[str, int] = Field(default_factory=dict)


class Freshness(BaseModel):
    """What a rebuild cost: per-page outcomes, the sitemaps, and the lastmod verdicts."""

    pages: PageOutcomes = Field(default_factory=PageOutcomes)
    sitemaps: SitemapsInfo | None = None  # None: the source lists no sitemap
    trust_lastmod: str = "auto"  # pack.toml [sitemap] trust_lastmod
    lastmod_hosts: dict[str, LastmodHost] = Field(default_factory=dict)


class Manifest(BaseModel):
    format_version: int = FORMAT_VERSION
    name: str
    description: str = ""
    build_id: str
    built_at: str  # ISO-8601 UTC
    partial: bool = False
    partial_reasons: list[str] = Field(default_factory=list)
    sources: list[SourceRecord] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    embedding: EmbeddingInfo
    keyword_vectors: KeywordVectorsInfo = Field(default_factory=KeywordVectorsInfo)
    encoder: EncoderInfo = Field(default_factory=EncoderInfo)
    extractor: ExtractorInfo
    kuzu_version: str
    query_module_version: str
    durations: dict[str, float] = Field(default_factory=dict)
    # Average LINKS_TO edges per article: graph rerank switches itself off below 2.
    avg_links_per_article: float = 0.0
    costs: dict[str, dict[str, float]] = Field(default_factory=dict)
    # Per-page outcomes of this build (skipped by lastmod, 304, unchanged, changed, new,
    # removed, failed), its sitemaps and lastmod verdicts; None in packs built before.
    freshness: Freshness | None = None
    # {relative path: {"sha256": hex, "bytes": size}} of every file of the build but the
    # manifest (packs.integrity); empty in packs written before checksums existed.
    checksums: dict[str, dict[str, object]] = Field(default_factory=dict)
    extra: dict[str, object] = Field(default_factory=dict)
    # Written at build time from the calibration of the pack's model (data only: the query
    # side reads it through packs.retrieval.gate.params_of, which gives a manifest from
    # before format 3, or one fitted to another gate version's signals, the current
    # calibration of its model).
    gate: GateInfo | None = None

    def write(self, build_dir: Path) -> Path:
        path = build_dir / MANIFEST_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def read_manifest(build_dir: Path) -> Manifest:
    """Load and validate `build_dir/manifest.json`; PackFormatError says what is wrong."""
    return parse_manifest(manifest_bytes(build_dir), build_dir)


def manifest_bytes(build_dir: Path) -> bytes:
    """The raw bytes of `build_dir/manifest.json` (what a signature covers)."""
    path = build_dir / MANIFEST_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise PackFormatError(f"{build_dir}: not a knowledge pack (no {MANIFEST_FILE})") from exc
    except OSError as exc:
        raise PackFormatError(f"{path}: unreadable manifest: {exc}") from exc


def parse_manifest(raw: bytes, build_dir: Path) -> Manifest:
    """Validate manifest bytes read from `build_dir` (named in errors): JSON, a format
    version this module reads, the fields. PackFormatError says what is wrong."""
    path = build_dir / MANIFEST_FILE
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackFormatError(f"{path}: unreadable manifest: {exc}") from exc
    if not isinstance(data, dict):
        raise PackFormatError(f"{path}: manifest is not a JSON object")
    check_format(data.get("format_version"), str(path))
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise PackFormatError(f"{path}: invalid manifest: {field_errors(exc)}") from exc
    except ValueError as exc:  # a validator's own error (one line already)
        raise PackFormatError(f"{path}: invalid manifest: {exc}") from exc


def field_errors(exc: ValidationError, limit: int = 3) -> str:
    """A pydantic error as one line naming each bad field and the value found:
    `checksums: Input should be a valid dictionary (got None)`; the first `limit`
    problems, then how many more."""
    problems = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        shown = "input" in err and err["type"] != "missing"  # a missing field's input is its parent
        problems.append(f"{where}: {err['msg']}" + (f" (got {got})" if shown else ""))
    more = exc.error_count() - limit
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
