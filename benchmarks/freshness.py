"""What freshness costs: a generated documentation site with a sitemap index, built once,
then rebuilt after 1 % of its pages changed (with their lastmod), with lastmod trusted and
with lastmod not trusted (conditional GETs only).

    nice python benchmarks/freshness.py                     # 10,000 and 1,000 pages
    python benchmarks/freshness.py --pages 300 --change 0.02   # a quick check

For each size N: the site (N HTML pages of about 8 KB, a sitemap index naming gzip
sitemaps of 1,000 pages with lastmod) is written under the work folder and served over
loopback by a threaded server in a process of its own that answers conditional requests
(ETag / If-None-Match) and counts requests by kind (sitemap files, pages answered 200 or
304, robots.txt) and the bytes it sent (status line, headers and body). Each build runs
in a fresh process (`--child`), reporting to one Prefect server this script starts on
port 18850 (a temp PREFECT_HOME), with the offline extractor and the packaged
all-MiniLM-L6-v2; the child reports its own peak RSS (the driver, and the tasks the
threads runner runs in it).

Steps: (1) first build; (2) 1 % of pages change with their lastmod, rebuild: the host's
lastmod is not trusted yet (no evidence), so every page is asked conditionally; this is
the build that earns the trust; (3) another 1 % change, and the pack's output and work
folders are copied; (4) rebuild with lastmod trusted; (5) the same rebuild on the copy
with `trust_lastmod = "never"` (conditional GETs only). Results go to stdout and
benchmarks/results/freshness.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="kpack-freshness-prefect-"))

from benchmarks import common  # noqa: E402
from benchmarks.scale_build import free_port  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "freshness.md"
PREFECT_PORT = 18850
PER_SITEMAP = 1000
TOPICS = ("scheduler", "volume", "ingress", "secret", "probe", "quota", "taint", "lease")


# --- the site ---------------------------------------------------------------------------


def page_html(i: int, version: int) -> str:
    """Page i at `version` (0 first): nav and footer around two sections of prose."""
    a, b = TOPICS[i % len(TOPICS)], TOPICS[(i // len(TOPICS)) % len(TOPICS)]
    # A documentation sidebar: most of a real page's bytes are its navigation (real pages
    # run 20-100 KB; these about 8 KB, which makes the sitemaps' share of a rebuild larger).
    nav = "".join(f'<li class="nav-item"><a class="nav-link" href="/docs/{t}/{n}.html">'
                  f'{t.title()} guide {n}</a></li>' for t in TOPICS for n in range(10))
    edit = f" Revised in edition {version}." if version else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{a.title()} {i}</title>"
        f"<link rel='stylesheet' href='/css/site.css'><script src='/js/site.js' defer>"
        f"</script></head><body><nav><ul>{nav}</ul></nav><main><article><h1>{a.title()} {i}</h1>"
        f"<p>The {a} controller number {i} watches the {b} objects of its namespace and "
        f"reconciles them with the desired state recorded in the cluster store. It retries "
        f"failed updates with a backoff and reports its progress as conditions.{edit}</p>"
        f"<h2>Configuring the {a} {i}</h2><p>Set the <code>{a}-{i}</code> field in the "
        f"manifest to tune how often the {a} resyncs with the {b}; the default of "
        f"{i % 50 + 10} seconds suits most clusters, and lower values cost more API calls."
        f"</p><pre><code>kind: {a.title()}\nspec:\n  interval: {i % 50 + 10}s\n</code></pre>"
        f"</article></main><footer><p>Documentation licensed under CC BY 4.0. Page {i} of "
        f"the generated site.</p></footer></body></html>")


def lastmod_of(version: int) -> str:
    return f"2026-{1 + version // 28:02d}-{1 + version % 28:02d}"


def write_site(root: Path, versions: list[int], base: str) -> None:
    """Write every page whose file is missing or stale, and the sitemaps (gzip children of
    PER_SITEMAP pages, an index naming them with their newest lastmod)."""
    docs = root / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    stamp = root / ".versions.json"
    old = json.loads(stamp.read_text()) if stamp.is_file() else []
    for i, v in enumerate(versions):
        if i >= len(old) or old[i] != v:
            (docs / f"p{i}.html").write_text(page_html(i, v), encoding="utf-8")
    children = []
    for k in range(0, len(versions), PER_SITEMAP):
        rows = "".join(f"<url><loc>{base}/docs/p{i}.html</loc><lastmod>{lastmod_of(v)}</lastmod>"
                       f"</url>" for i, v in enumerate(versions[k:k + PER_SITEMAP], start=k))
        xml = ('<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/'
               f'schemas/sitemap/0.9">{rows}</urlset>')
        name = f"sitemap-{k // PER_SITEMAP}.xml.gz"
        (root / name).write_bytes(gzip.compress(xml.encode(), mtime=0))
        children.append((name, lastmod_of(max(versions[k:k + PER_SITEMAP]))))
    index = "".join(f"<sitemap><loc>{base}/{n}</loc><lastmod>{m}</lastmod></sitemap>"
                    for n, m in children)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/'
        f'schemas/sitemap/0.9">{index}</sitemapindex>', encoding="utf-8")
    stamp.write_text(json.dumps(versions))


# --- the server (a process of its own) --------------------------------------------------


def serve(root: Path, port: int) -> None:
    """Serve `root` on 127.0.0.1:`port` until killed (the `--serve` child)."""
    server = make_server(root, port)
    print("READY", flush=True)
    server.serve_forever()


def make_server(root: Path, port: int) -> ThreadingHTTPServer:
    """A server of `root` on 127.0.0.1:`port` with ETags; /__stats and /__reset for the
    counts by kind (page_200, page_304, sitemap_200, ..., bytes, bytes_page, ...)."""
    counts: Counter = Counter()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            if path in ("/__stats", "/__reset"):
                with lock:
                    body = json.dumps(dict(counts)).encode()
                    if path == "/__reset":
                        counts.clear()
                self._send(200, body, "application/json", {}, count=False)
                return
            kind = ("robots" if path == "/robots.txt" else
                    "sitemap" if path.startswith("/sitemap") else "page")
            file = (root / path.lstrip("/")).resolve()
            if root not in file.parents or not file.is_file():
                self._send(404, b"not found", "text/plain", {}, kind=f"{kind}_404")
                return
            body = file.read_bytes()
            etag = '"' + hashlib.sha1(body).hexdigest() + '"'
            if self.headers.get("If-None-Match") == etag:
                self._send(304, b"", None, {"ETag": etag}, kind=f"{kind}_304")
                return
            ctype = ("application/gzip" if path.endswith(".gz") else "application/xml"
                     if path.endswith(".xml") else "text/html; charset=utf-8")
            self._send(200, body, ctype, {"ETag": etag}, kind=f"{kind}_200")

        def _send(self, status: int, body: bytes, ctype: str | None, headers: dict,
                  kind: str = "", count: bool = True) -> None:
            head = [f"HTTP/1.1 {status} {self.responses[status][0]}",
                    f"Content-Length: {len(body)}"]
            head += [f"Content-Type: {ctype}"] if ctype else []
            head += [f"{k}: {v}" for k, v in headers.items()]
            raw = ("\r\n".join(head) + "\r\n\r\n").encode() + body
            self.wfile.write(raw)
            if count:
                with lock:
                    counts[kind] += 1
                    counts[f"bytes_{kind.split('_')[0]}"] += len(raw)
                    counts["bytes"] += len(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def server_call(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


# --- builds -----------------------------------------------------------------------------


def one_build(source: str | Path, out: str | Path, work: str | Path) -> dict:
    """Run one build in this process: its seconds, this process's peak RSS, its status
    and freshness counts."""
    from flows.build import run_build

    start = time.perf_counter()
    summary = run_build(source, out, work_dir=work, task_runner_setting="threads")
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "peak_rss_mb": peak_kb / 1024,
            "status": summary.get("status"), "freshness": summary.get("freshness")}


def child(source: str, out: str, work: str) -> None:
    """The `--child` process: one build; prints its result as a RESULT line."""
    print("RESULT " + json.dumps(one_build(source, out, work), default=str), flush=True)


def build(folder: Path, source: Path, out: Path, work: Path, port: int, label: str,
          in_process: bool = False) -> dict:
    server_call(port, "/__reset")
    if in_process:
        result = one_build(source, out, work)
    else:
        result = _build_in_child(folder, source, out, work, label)
    result["requests"] = server_call(port, "/__stats")
    result["label"] = label
    pages = (result.get("freshness") or {}).get("pages") or {}
    print(f"  {label}: {result['seconds']:.1f} s, {result['peak_rss_mb']:.0f} MB, "
          f"{result['requests'].get('bytes', 0):,} bytes; {pages}", flush=True)
    return result


def source_folder(path: Path, base: str, trust: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "urls.txt").write_text(f"sitemap: {base}/sitemap.xml\n")
    (path / "pack.toml").write_text(
        f'name = "freshness"\nallow_private_hosts = true\nembedding_model = "{common.MODEL}"\n'
        'extractor = "offline"\nfetch_concurrency = 16\nper_host_concurrency = 8\n'
        f'[sitemap]\ntrust_lastmod = "{trust}"\n')
    return path


def _build_in_child(folder: Path, source: Path, out: Path, work: Path, label: str) -> dict:
    log = folder / f"build-{label}.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("w") as fh:
        proc = subprocess.run([sys.executable, __file__, "--child", str(source), str(out),
                               str(work)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=fh, text=True, check=False)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"build {label} failed (exit {proc.returncode}); see {log}")
    return json.loads(lines[-1][len("RESULT "):])


def run_size(pages: int, change: float, base_dir: Path, seed: int = 38,
             in_process: bool = False) -> list[dict]:
    """The five steps of the module docstring on a site of `pages` pages; one row per
    build. `in_process`: the server in a thread and the builds in this process (the
    tests' way; the RSS column then means nothing)."""
    folder = base_dir / f"freshness-{pages}"
    shutil.rmtree(folder, ignore_errors=True)
    site = folder / "site"
    site.mkdir(parents=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    versions = [0] * pages
    write_site(site, versions, base)
    if in_process:
        httpd = make_server(site.resolve(), port)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        stop = httpd.shutdown
    else:
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(site), str(port)],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "READY"

        def stop() -> None:
            server.terminate()
            server.wait(timeout=10)

    rng = random.Random(seed)
    go = lambda *a: build(*a, in_process=in_process)  # noqa: E731
    try:
        source = source_folder(folder / "source", base, "auto")
        out, work = folder / "out", folder / "work"
        print(f"{pages:,} pages: first build", flush=True)
        rows = [go(folder, source, out, work, port, "first build")]
        for step in ("rebuild, lastmod not yet trusted", "rebuild, lastmod trusted"):
            for i in rng.sample(range(pages), max(1, round(pages * change))):
                versions[i] += 1
            write_site(site, versions, base)
            if step.endswith("lastmod trusted"):
                # The copy runs first: its state.json names the original's shard outputs
                # (absolute paths), which the trusted rebuild then leaves as they were.
                print(f"{pages:,} pages: the same rebuild on a copy, trust_lastmod = never",
                      flush=True)
                for name in ("out", "work"):
                    shutil.copytree(folder / name, folder / f"{name}-never", symlinks=True)
                never = source_folder(folder / "source-never", base, "never")
                cold = go(folder, never, folder / "out-never", folder / "work-never", port,
                          "same rebuild, trust_lastmod = never")
            print(f"{pages:,} pages: {step}", flush=True)
            rows.append(go(folder, source, out, work, port, step))
        rows.append(cold)
    finally:
        stop()
    for row in rows:
        row["pages"] = pages
    return rows


def table(rows: list[dict]) -> str:
    head = ("| pages | build | wall s | vs first | bytes downloaded | vs first | sitemap "
            "req (304) | page 200 | page 304 | robots | skipped by lastmod | changed | "
            "driver peak RSS MB |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            "---:|---:|\n")
    out = []
    firsts = {r["pages"]: r for r in rows if r["label"] == "first build"}
    for r in rows:
        q, first = r["requests"], firsts[r["pages"]]
        fresh = (r.get("freshness") or {}).get("pages") or {}
        sitemap = q.get("sitemap_200", 0) + q.get("sitemap_304", 0)
        out.append(
            f"| {r['pages']:,} | {r['label']} | {r['seconds']:.1f} | "
            f"{r['seconds'] / first['seconds']:.0%} | {q.get('bytes', 0):,} | "
            f"{q.get('bytes', 0) / first['requests']['bytes']:.1%} | {sitemap} "
            f"({q.get('sitemap_304', 0)}) | {q.get('page_200', 0):,} | {q.get('page_304', 0):,} "
            f"| {q.get('robots_200', 0) + q.get('robots_404', 0)} | "
            f"{fresh.get('skipped_lastmod', 0):,} | {fresh.get('changed', 0):,} | "
            f"{r['peak_rss_mb']:.0f} |")
    return head + "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[10_000, 1_000])
    parser.add_argument("--change", type=float, default=0.01, help="share of pages changed")
    parser.add_argument("--out", type=Path, default=common.DEFAULT_WORK)
    parser.add_argument("--child", nargs=3, metavar=("SOURCE", "OUT", "WORK"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--serve", nargs=2, metavar=("ROOT", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--in-process", action="store_true",
                        help="serve and build in this process, on the Prefect server "
                             "configured (tests); the RSS column then means nothing")
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if args.serve:
        serve(Path(args.serve[0]).resolve(), int(args.serve[1]))
        return
    print(common.machine_line(), flush=True)
    if args.in_process:
        rows = [r for n in args.pages for r in run_size(n, args.change, args.out,
                                                        in_process=True)]
    else:
        rows = _with_prefect_server(lambda: [r for n in args.pages for r in run_size(
            n, args.change, args.out)])
    text = table(rows)
    print(text)
    text += summary(rows, args.change)
    print(text.split("\n\n", 1)[-1])
    common.append_run(args.results, f"python benchmarks/freshness.py --pages "
                      f"{' '.join(map(str, args.pages))} --change {args.change}", text)


def _with_prefect_server(work):
    """Run `work()` with one Prefect server on PREFECT_PORT (a temp PREFECT_HOME) that
    every build reports to, so that no build pays for starting one."""
    from flows import server as prefect_server

    info, _ = prefect_server.start(port=PREFECT_PORT)
    os.environ["PREFECT_API_URL"] = info.url
    try:
        return work()
    finally:
        prefect_server.stop()


def summary(rows: list[dict], change: float) -> str:
    lines = []
    by = {(r["pages"], r["label"]): r for r in rows}
    for n in sorted({r["pages"] for r in rows}, reverse=True):
        first, hot = by[(n, "first build")], by[(n, "rebuild, lastmod trusted")]
        cold = by[(n, "same rebuild, trust_lastmod = never")]
        share = hot["requests"]["bytes"] / first["requests"]["bytes"]
        lines.append(f"- {n:,} pages, {change:.0%} changed: the trusted rebuild downloaded "
                     f"{share:.1%} of the first build's bytes (goal <= 5 %), in "
                     f"{hot['seconds'] / first['seconds']:.0%} of its wall time; with lastmod "
                     f"not trusted {cold['requests']['bytes'] / first['requests']['bytes']:.1%}"
                     f" in {cold['seconds'] / first['seconds']:.0%}")
    sizes = sorted({r["pages"] for r in rows})
    if len(sizes) >= 2:
        small, big = sizes[0], sizes[-1]
        for label in ("first build", "rebuild, lastmod trusted"):
            ratio = by[(big, label)]["peak_rss_mb"] / by[(small, label)]["peak_rss_mb"]
            lines.append(f"- driver peak RSS, {label}: {big:,} pages = {ratio:.2f}x "
                         f"{small:,} pages (goal <= 1.3x)")
    return "\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
