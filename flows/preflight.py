"""Preflight: everything a build can check before it fetches a page or starts Prefect.

Without it, problems surfaced late and one per build: offline, the default model failed
only after 2 minutes of hub retries; then the private-host refusal appeared on the next
build. `check_build_inputs` reads the source folder (urls.txt, pack.toml) and then
`preflight` checks, in one pass, and reports every problem in one line:

- the embedding model is on this machine (a folder, the packaged copy, or the hub
  cache), or the hub answers; offline it fails at once, without hub retries. Files are
  looked at, nothing is imported: torch, sentence-transformers and huggingface_hub
  cost seconds to import, and a typo must be reported in the time `kpack inspect` takes;
- the hosts: when every URL would be refused (private addresses, allowed_hosts), it
  says so up front with the reason and the count;
- an API key exists when the extractor is "claude";
- the output and work folders are writable.

`PreflightError` is bad input (exit 2 in the CLI). Nothing here imports Prefect: the CLI
runs these checks before it loads the build (flows/cli/build.py), so bad input is
reported in about the time of `kpack inspect` (benchmarks/cli_latency.py).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packs.extras import OFFLINE_INSTALL
from tasks.sources import SourceConfig, load_source, resolve_embedding_model

HUB_TIMEOUT_S = 5.0
DNS_TIMEOUT_S = 5.0
MAX_HOSTS_RESOLVED = 64  # beyond this, hosts are judged by name only (fetch checks the rest)
OFFLINE_FIX = ("use a local model folder (--embedding-model /path/to/model) or the packaged "
               f"all-MiniLM-L6-v2 ({OFFLINE_INSTALL}, then "
               "--embedding-model all-MiniLM-L6-v2)")


class PreflightError(ValueError):
    """The build cannot succeed as configured; the message lists every problem found."""


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _hub_cache() -> Path:
    """The Hugging Face hub cache folder, as huggingface_hub computes it."""
    if os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.environ.get("HF_HUB_CACHE") or os.environ["HUGGINGFACE_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return Path(os.path.expanduser(home)) / "hub"


def hub_snapshot(model_id: str) -> Path | None:
    """The cached snapshot folder of hub model `model_id` (the revision refs/main names,
    else any snapshot holding a config), or None. A bare name is also looked up under
    sentence-transformers/, as sentence-transformers does."""
    ids = [model_id] if "/" in model_id else [model_id, f"sentence-transformers/{model_id}"]
    for repo_id in ids:
        repo = _hub_cache() / ("models--" + repo_id.replace("/", "--"))
        try:
            ref = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
        except OSError:
            ref = ""
        candidates = [repo / "snapshots" / ref] if ref else []
        snapshots = repo / "snapshots"
        if snapshots.is_dir():
            candidates += sorted(snapshots.iterdir())
        for folder in candidates:
            if (folder / "config.json").is_file() or (folder / "modules.json").is_file():
                return folder
    return None


def model_problem(name: str) -> str | None:
    """Why the embedding model cannot be loaded here, or None: a local folder, the copy
    in an installed package (packs.embedding.resolve_model), the hub cache (files only),
    else, when online, the hub's answer about the id."""
    from packs.embedding import EmbeddingModelError, resolve_model

    try:
        resolved = resolve_model(name)
    except EmbeddingModelError as exc:
        return str(exc)
    if Path(resolved.load_from).is_dir():
        return None
    model_id = resolved.load_from
    if hub_snapshot(model_id) is not None:
        return None
    if _truthy("HF_HUB_OFFLINE") or _truthy("TRANSFORMERS_OFFLINE"):
        return (f"embedding model {model_id!r} is not on this machine and HF_HUB_OFFLINE is "
                f"set: {OFFLINE_FIX}")
    import httpx

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    try:
        status = httpx.head(f"{endpoint}/api/models/{model_id}", timeout=HUB_TIMEOUT_S,
                            follow_redirects=True).status_code
    except httpx.HTTPError as exc:
        return (f"embedding model {model_id!r} is not on this machine and the model hub "
                f"cannot be reached ({type(exc).__name__}): {OFFLINE_FIX}")
    if status in (401, 404):
        return f"embedding model {model_id!r} does not exist on the model hub; check its name"
    return None


def _resolve(host: str) -> list[str]:
    return sorted({info[4][0] for info in socket.getaddrinfo(host, None)})


def host_refusals(source: SourceConfig, allow_private: bool) -> Counter[str]:
    """Reason → count of the http(s) URLs that fetching would refuse outright."""
    from tasks.fetch.policy import DEFAULT_GITHUB_RAW_BASE as RAW
    from tasks.fetch.policy import (
        check_addresses,
        effective_allowed_hosts,
        host_allowed,
        ip_literal,
    )

    cfg = source.config
    allowed = effective_allowed_hosts(tuple(cfg.allowed_hosts), RAW)
    by_host: dict[str, list[str]] = {}
    for entry in source.urls:
        parts = urlsplit(entry.url)
        if parts.scheme in ("http", "https") and parts.hostname:
            by_host.setdefault(parts.hostname, []).append(entry.url)
    reasons: Counter[str] = Counter()
    to_resolve = []
    for host, urls in by_host.items():
        if not host_allowed(host, allowed):
            reasons[f"host {host} is not in allowed_hosts"] += len(urls)
        elif (ip := ip_literal(host)) is not None:
            why = check_addresses(host, [ip], allow_private=allow_private)
            if why:
                reasons[why] += len(urls)
        elif len(to_resolve) < MAX_HOSTS_RESOLVED:
            to_resolve.append(host)
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {host: pool.submit(_resolve, host) for host in to_resolve}
        for host, future in futures.items():
            try:
                why = check_addresses(host, future.result(timeout=DNS_TIMEOUT_S),
                                      allow_private=allow_private)
            except (OSError, FutureTimeout):
                continue  # unresolvable now: the fetch stage reports it per URL
            if why:
                reasons[why] += len(by_host[host])
    return reasons


def _writable(folder: Path, what: str) -> str | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".kpack-preflight-"):
            pass
    except OSError as exc:
        return f"the {what} {folder} is not writable ({exc.strerror or exc})"
    return None


def preflight(source: SourceConfig, out: Path, work: Path, *, model: str,
              extractor: str | None, allow_private_hosts: bool) -> None:
    """Raise PreflightError listing every problem that would fail this build."""
    problems = [p for p in (_writable(out, "output folder"), _writable(work, "work folder"))
                if p]
    kind = extractor or source.config.extractor
    if kind == "claude" and not os.environ.get("ANTHROPIC_API_KEY"):
        problems.append("extractor = claude needs ANTHROPIC_API_KEY; set it, or use "
                        "extractor = auto (offline without a key)")
    if (why := model_problem(model)) is not None:
        problems.append(why)
    for auth in source.config.auth:
        try:
            auth.value()
        except ValueError as exc:  # AuthError: names the variable, never its value
            problems.append(str(exc))
    allow_private = allow_private_hosts or source.config.allow_private_hosts
    refusals = host_refusals(source, allow_private)
    remote = sum(1 for u in source.urls if urlsplit(u.url).scheme in ("http", "https"))
    if refusals and sum(refusals.values()) == len(source.urls) == remote:
        top = ", ".join(f"{n} × {reason}" for reason, n in refusals.most_common(2))
        more = len(refusals) - 2
        problems.append(f"all {len(source.urls)} URLs would be refused: {top}"
                        + (f" (and {more} more reasons)" if more > 0 else ""))
    if problems:
        raise PreflightError(f"{source.name}: " + "; ".join(problems))


@dataclass(frozen=True)
class BuildInputs:
    """A build's inputs, read and checked: what `run_build` needs before Prefect starts."""

    source: SourceConfig
    out: Path
    work: Path
    model: str  # the embedding model the build will use (flag, env, or pack.toml)


def check_build_inputs(source_dir: str | Path, out_dir: str | Path,
                       work_dir: str | Path | None = None, *,
                       embedding_model: str | None = None, extractor: str | None = None,
                       allow_private_hosts: bool = False,
                       run_preflight: bool = True) -> BuildInputs:
    """Read the source folder (urls.txt, pack.toml) and run the preflight (unless
    `run_preflight` is False: a caller ran it moments ago); the checked inputs. Raises
    SourceError (tasks.sources) for a missing folder or invalid file, with its file and
    line, and PreflightError listing every other problem. Imports neither Prefect nor
    the embedding libraries (see the module doc)."""
    source = load_source(source_dir)
    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out / ".work"
    model = resolve_embedding_model(source.config, embedding_model)
    if run_preflight:
        preflight(source, out, work, model=model, extractor=extractor,
                  allow_private_hosts=allow_private_hosts)
    return BuildInputs(source, out, work, model)
