"""manifest.json: what a pack is, how it was built, and how to query it.

The build writes a `Manifest`; readers load it with `read_manifest`, which checks the
format version before anything else is trusted.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, model_validator

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
    # {relative path: {"sha256": hex, "bytes": size}} of every file of the build but the
    # manifest (packs.integrity); empty in packs written before checksums existed.
    checksums: dict[str, dict[str, object]] = Field(default_factory=dict)
    extra: dict[str, object] = Field(default_factory=dict)
    # Written at build time from the calibration of the pack's model; a manifest from before
    # format 3, or whose parameters were fitted to another gate version's signals, gets the
    # current calibration of its model when read (weights only mean something for the
    # signals they were fitted on).
    gate: GateInfo | None = None

    @model_validator(mode="after")
    def _gate_of_the_model(self) -> Manifest:
        from packs.retrieval.gate import GATE_VERSION, params_for

        if self.gate is None or self.gate.version != GATE_VERSION:
            self.gate = GateInfo(**params_for(self.embedding.model))
        return self

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
    except ValueError as exc:
        raise PackFormatError(f"{path}: invalid manifest: {exc}") from exc
