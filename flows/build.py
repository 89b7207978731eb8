"""The build flow: urls.txt → fetch → split + links → extract + embed → keywords → publish.

Composition only: each stage is a task from tasks.stages; this module decides the order,
the content keys that chain them, and what runs side by side (links beside split,
extraction — network-bound — beside embedding — CPU-bound). Per-stage durations go into
the manifest.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from flows.settings import configure_prefect_env

configure_prefect_env()

from prefect import flow, get_run_logger, tags  # noqa: E402
from prefect.settings import (  # noqa: E402
    PREFECT_LOCAL_STORAGE_PATH,
    PREFECT_RESULTS_PERSIST_BY_DEFAULT,
    temporary_settings,
)

from flows.artifacts import publish_report  # noqa: E402
from flows.runners import task_runner  # noqa: E402
from packs.embedding import Embedder  # noqa: E402
from packs.manifest import EmbeddingInfo  # noqa: E402
from tasks import extract as extract_core  # noqa: E402
from tasks import fetch as fetch_core  # noqa: E402
from tasks import split as split_core  # noqa: E402
from tasks import stages  # noqa: E402
from tasks.embed import KEYWORD_VERSION  # noqa: E402
from packs.format import FORMAT_VERSION, QUERY_MODULE_VERSION  # noqa: E402
from tasks.publish import append_history, new_build_id  # noqa: E402
from tasks.sources import (  # noqa: E402
    CONFIG_FILE,
    SourceConfig,
    SourceError,
    load_source,
    resolve_embedding_model,
)


class BuildError(RuntimeError):
    """The build cannot produce a pack (e.g. no page could be fetched)."""


def chunking(source: SourceConfig, embedder: Embedder) -> tuple[int, int]:
    """(words per chunk, overlap words) from pack.toml, or fitted to the model's window.
    A chunk_words the model cannot read whole is refused: its tail would never be embedded."""
    fits = split_core.words_for_window(embedder.max_seq_length)
    words = source.config.chunk_words or fits
    if words > fits:
        raise SourceError(
            f"{source.folder / CONFIG_FILE}: chunk_words = {words} is more than "
            f"{embedder.model_id} reads ({embedder.max_seq_length} tokens ≈ {fits} words); "
            f"use at most {fits} or leave it unset")
    return words, int(words * source.config.chunk_overlap)


def fetch_config(source: SourceConfig, allow_private_hosts: bool) -> fetch_core.FetchConfig:
    cfg = source.config
    return fetch_core.FetchConfig(
        timeout_s=cfg.fetch_timeout_s,
        max_bytes=cfg.max_page_bytes,
        concurrency=cfg.fetch_concurrency,
        per_host_concurrency=cfg.per_host_concurrency,
        allowed_hosts=tuple(cfg.allowed_hosts),
        allow_private_hosts=allow_private_hosts or cfg.allow_private_hosts,
    )


def extract_config(source: SourceConfig, kind: str | None,
                   max_cost_usd: float | None) -> extract_core.ExtractConfig:
    cfg = source.config
    return extract_core.ExtractConfig(
        kind=kind or cfg.extractor, model=cfg.extractor_model,
        concurrency=cfg.extract_concurrency, max_cost_usd=max_cost_usd,
    )


def _run_name() -> str:
    """`<pack>-<build id>`: the build id is generated here when the caller gave none
    (scheduled runs), and the flow reads it back from its own run name."""
    from prefect.runtime import flow_run

    params = flow_run.parameters
    return f"{params['name']}-{params.get('build_id') or new_build_id()}"


def inputs_fingerprint(*keys: str) -> str:
    """Everything a published build is made from: stage keys and format versions."""
    return stages._key("inputs", *keys, FORMAT_VERSION, QUERY_MODULE_VERSION)


@flow(name="build-pack", flow_run_name=_run_name, log_prints=False,
      task_runner=task_runner())  # $KPACK_TASK_RUNNER or threads; run_build can override
def build_pack(
    name: str,
    source_dir: str,
    out_dir: str,
    work_dir: str,
    build_id: str | None = None,
    embedding_model: str | None = None,
    extractor: str | None = None,
    allow_private_hosts: bool = False,
    max_cost_usd: float | None = None,
) -> dict:
    """Build the pack of `source_dir` into `out_dir/<name>/`; returns a summary dict.

    When every stage key equals the ones the published build was made from, nothing is
    split, extracted, embedded or republished: the summary says "no changes" and names
    the current build (readers keep the build they have, and caches stay warm).
    """
    from prefect.runtime import flow_run

    t_start = time.perf_counter()
    _quiet_libraries()  # here too, for scheduled runs that do not come through run_build
    build_id = build_id or flow_run.name.rsplit("-", 1)[-1]
    source = load_source(source_dir)
    out = Path(out_dir).resolve()
    work = stages.WorkDir(Path(work_dir).resolve(), source.name)
    model_name = resolve_embedding_model(source.config, embedding_model)
    embedder = Embedder(model_name)
    embedding = EmbeddingInfo(
        model=embedder.model_id, dim=embedder.dim, normalized=True,
        query_prefix=embedder.spec.query_prefix, document_prefix=embedder.spec.document_prefix,
        max_seq_length=embedder.max_seq_length, gate_threshold=embedder.spec.gate_threshold,
    )
    max_words, overlap_words = chunking(source, embedder)
    xcfg = extract_config(source, extractor, max_cost_usd)
    pack_tag = f"pack:{source.name}"

    def stage(task, label: str):
        return task.with_options(task_run_name=f"{label}-{source.name}",
                                 tags=[pack_tag, f"stage:{label}"])

    fetched = stage(stages.fetch_task, "fetch")(
        source, work, fetch_config(source, allow_private_hosts)
    )
    if fetched.rows["usable"] == 0:
        raise BuildError(
            f"{source.name}: none of the {fetched.rows['pages']} URLs could be fetched "
            f"({fetched.info['status_counts']}); nothing was published. See the fetch log."
        )
    split_key = stages._key("split", fetched.key, split_core.SPLITTER_VERSION, max_words,
                            overlap_words)
    links_key = stages._key("links", fetched.key, stages.LINKS_VERSION)
    extract_key = stages._key("extract", split_key, xcfg.kind, xcfg.model,
                              extract_core.PROMPT_VERSION, bool(os.environ.get("ANTHROPIC_API_KEY")))
    embed_key = stages._key("embed", split_key, embedder.model_id, stages.EMBED_VERSION)
    keywords_on = source.config.keyword_vectors
    fingerprint = inputs_fingerprint(split_key, links_key, extract_key, embed_key,
                                     source.config.description,
                                     KEYWORD_VERSION if keywords_on else "no-keyword-vectors")
    unchanged = stages.unchanged_build(out, source.name, fingerprint)
    if unchanged is not None:
        get_run_logger().info("no changes since build %s: nothing to publish",
                              unchanged["build_id"])
        append_history(out / source.name, build_id, "no changes",
                       f"inputs equal build {unchanged['build_id']}")
        unchanged["seconds"] = round(time.perf_counter() - t_start, 1)
        unchanged["durations"] = {"fetch": round(fetched.seconds, 3)}
        publish_report(unchanged)
        return unchanged

    split_f = stage(stages.split_task, "split").submit(
        split_key, fetched, work, max_words, overlap_words
    )
    links_f = stage(stages.links_task, "links").submit(links_key, fetched, work)
    split = split_f.result()
    extract_f = stage(stages.extract_task, "extract").submit(extract_key, split, work, xcfg)
    embed_f = stage(stages.embed_task, "embed").submit(embed_key, split, work, model_name)
    links, extracted, embedded = links_f.result(), extract_f.result(), embed_f.result()
    # Keyword vectors (opt-in: keyword_vectors = true in pack.toml; they did not help on
    # the benchmarks, see BENCHMARKS.md) need both the extraction and the content
    # vectors; their record (content + keyword vectors) is what publish reads.
    records = [fetched, split, links, extracted, embedded]
    if keywords_on:
        embedded = stage(stages.keywords_task, "keywords")(split, embedded, extracted, work,
                                                           model_name)
        records.append(embedded)
    durations = {r.stage: round(r.seconds, 3) for r in records}
    summary = stage(stages.publish_task, "publish")(
        source, out, build_id, embedding,
        fetched, split, links, extracted, embedded, durations, fingerprint,
    )
    summary["seconds"] = round(time.perf_counter() - t_start, 1)
    summary["durations"] = durations
    publish_report(summary)
    return summary


@flow(name="estimate-pack", flow_run_name="{name}-estimate", log_prints=False)
def estimate_pack(
    name: str, source_dir: str, work_dir: str, embedding_model: str | None = None,
    extractor: str | None = None, allow_private_hosts: bool = False,
) -> dict:
    """Fetch and split like a build, then price the extraction without calling Claude."""
    source = load_source(source_dir)
    work = stages.WorkDir(Path(work_dir).resolve(), source.name)
    embedder = Embedder(resolve_embedding_model(source.config, embedding_model))
    max_words, overlap_words = chunking(source, embedder)
    fetched = stages.fetch_task(source, work, fetch_config(source, allow_private_hosts))
    split_key = stages._key("split", fetched.key, split_core.SPLITTER_VERSION, max_words,
                            overlap_words)
    split = stages.split_task(split_key, fetched, work, max_words, overlap_words)
    xcfg = extract_config(source, extractor or "claude", None)
    estimate = extract_core.estimate_cost(split.table("sections"), xcfg, work.cache)
    return {"pack": source.name, "pages": fetched.rows["usable"], **estimate}


def _prefect_settings(work: Path):
    return temporary_settings(updates={
        PREFECT_LOCAL_STORAGE_PATH: str((work / "prefect-results").resolve()),
        PREFECT_RESULTS_PERSIST_BY_DEFAULT: True,
    })


def _quiet_libraries() -> None:
    for name in ("httpx", "httpcore", "trafilatura", "htmldate", "courlan", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_estimate(source_dir: str | Path, out_dir: str | Path, *, work_dir=None,
                 embedding_model: str | None = None, extractor: str | None = None,
                 allow_private_hosts: bool = False) -> dict:
    """`kpack build --estimate`: tokens and USD of extracting the source's sections.

    Sections already in the LLM cache count zero. Nothing is published.
    """
    source = load_source(source_dir)
    work = Path(work_dir) if work_dir else Path(out_dir) / ".work"
    work.mkdir(parents=True, exist_ok=True)
    _quiet_libraries()
    with _prefect_settings(work):
        return estimate_pack(
            name=source.name, source_dir=str(source.folder), work_dir=str(work.resolve()),
            embedding_model=embedding_model, extractor=extractor,
            allow_private_hosts=allow_private_hosts,
        )


def run_build(
    source_dir: str | Path,
    out_dir: str | Path,
    *,
    work_dir: str | Path | None = None,
    embedding_model: str | None = None,
    extractor: str | None = None,
    allow_private_hosts: bool = False,
    max_cost_usd: float | None = None,
    task_runner_setting: str | None = None,
) -> dict:
    """Validate the source, then run the build flow with results stored in the work dir.

    The work directory defaults to `<out_dir>/.work`; it holds the intermediates and the
    caches that make rebuilds cheap, shared by all packs built into the same folder.
    """
    source = load_source(source_dir)  # fail fast, before Prefect starts
    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    _quiet_libraries()
    build_id = new_build_id()
    try:
        with _prefect_settings(work), tags(f"pack:{source.name}"):
            flow_fn = (build_pack.with_options(task_runner=task_runner(task_runner_setting))
                       if task_runner_setting else build_pack)
            return flow_fn(
                name=source.name, build_id=build_id, source_dir=str(source.folder),
                out_dir=str(out.resolve()), work_dir=str(work.resolve()),
                embedding_model=embedding_model, extractor=extractor,
                allow_private_hosts=allow_private_hosts, max_cost_usd=max_cost_usd,
            )
    except Exception as exc:
        # Recorded, then re-raised: the pack's history shows failed runs next to good ones.
        append_history(out / source.name, build_id, "failed", f"{type(exc).__name__}: {exc}")
        raise
