"""The pages about packs and their builds: `/` (every pack), `/builds` (history), `/diff`
(two builds compared, as `kpack diff` does) and `/eval` (the last saved scorecard)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse

from packs import layout
from packs.diff import diff_builds
from packs.explore.web import Served, explorer, page, param
from packs.format import PackFormatError
from packs.manifest import Manifest, read_manifest
from packs.status import describe, pack_status

# History statuses a build run can end with (packs.layout, flows/build.py).
STATUS_LABELS = {"published": "published", "no changes": "no changes",
                 "refused": "refused by the guard", "failed": "failed",
                 "crashed": "crashed", "unreadable": "unreadable line"}


def _extract_stats(m: Manifest) -> dict:
    stats = m.extra.get("extract_stats")
    return stats if isinstance(stats, dict) else {}


def pack_summary(served: Served) -> dict:
    """What `/` shows of one pack: manifest, cost, guard verdicts, history counts, and its
    freshness as `kpack status` tells it (packs/status.py)."""
    m = served.pack.manifest
    history = layout.read_history(served.root) if served.root else []
    status = pack_status(served.root) if served.root else None
    published_at = next((h.get("at", "") for h in reversed(history)
                         if h.get("build_id") == m.build_id and h.get("status") == "published"),
                        "")
    refusals = [h for h in history if h.get("status") == "refused"]
    return {
        "served": served, "m": m, "stats": _extract_stats(m),
        "current_id": layout.current_id(served.root) if served.root else m.build_id,
        "guard": m.extra.get("guard") or "not recorded (built before verdicts were kept)",
        "refusals": refusals[-3:], "refusal_count": len(refusals),
        "refused_since": sum(h.get("at", "") > published_at for h in refusals),
        "runs": len(history),
        "status": status, "status_lines": describe(status)[1:] if status else [],
        "status_head": describe(status)[0].split(": ", 1)[1] if status else "",
    }


def index(request: Request) -> HTMLResponse:
    ex = explorer(request)
    label = param(request, "pack")
    packs = [pack_summary(s) for s in ex.served.values()]
    # Every pack is listed; `pack` marks the one the other pages default to.
    return page(request, "index.html", {"packs": packs,
                                        "served": ex.get(label) if label else None})


def _build_rows(served: Served) -> list[dict]:
    """One row per history line (newest first), with the manifest of each build still on
    disk; builds on disk without a history line (installed archives) are listed too."""
    root = served.root
    manifests: dict[str, Manifest | None] = {}
    if root:
        for build_id in layout.build_ids(root):
            try:
                manifests[build_id] = read_manifest(layout.build_path(root, build_id))
            except PackFormatError:
                manifests[build_id] = None
    else:
        manifests[served.pack.manifest.build_id] = served.pack.manifest
    history = layout.read_history(root) if root else []
    rows, seen = [], set()
    for h in history:
        bid = str(h.get("build_id", ""))
        m = manifests.get(bid) if h.get("status") == "published" else None
        if m is not None:
            seen.add(bid)
        rows.append({"at": h.get("at", ""), "build_id": bid, "status": h.get("status", ""),
                     "label": STATUS_LABELS.get(h.get("status", ""), h.get("status", "")),
                     "detail": h.get("detail", ""), "m": m,
                     "stats": _extract_stats(m) if m else {}, "on_disk": bid in manifests})
    for bid, m in manifests.items():
        if bid not in seen and m is not None:
            rows.append({"at": m.built_at, "build_id": bid, "status": "published",
                         "label": "published (no history line)", "detail": "", "m": m,
                         "stats": _extract_stats(m), "on_disk": True})
    rows.sort(key=lambda r: (r["at"], r["build_id"]), reverse=True)
    return rows


def builds(request: Request) -> HTMLResponse:
    served = explorer(request).get(param(request, "pack"))
    rows = _build_rows(served)
    on_disk = sorted({r["build_id"] for r in rows if r["on_disk"] and r["m"]})
    stages = sorted({k for r in rows if r["m"] for k in r["m"].durations})
    return page(request, "builds.html",
                {"served": served, "rows": rows, "on_disk": on_disk, "stages": stages,
                 "current_id": layout.current_id(served.root) if served.root else None},
                switch="/builds")


def diff(request: Request) -> HTMLResponse:
    served = explorer(request).get(param(request, "pack"))
    root = served.root
    if root is None:
        return page(request, "diff.html", {"served": served, "result": None, "ids": [],
                                           "old": "", "new": "",
                                           "problem": "this pack was opened as a lone build "
                                                      "folder: there is no other build"},
                    switch="/diff")
    ids = layout.build_ids(root)
    new = param(request, "to") or layout.current_id(root) or (ids[-1] if ids else "")
    older = [i for i in ids if i < new]
    old = param(request, "from") or (older[-1] if older else "")
    problem, result = None, None
    for bid in (old, new):
        if bid and not (layout.valid_build_id(bid) and bid in ids):
            raise HTTPException(404, f"build {bid[:80]!r} is not on disk in this pack "
                                     f"(kept: {', '.join(ids) or 'none'})")
    if not old or not new:
        problem = "only one build is kept on disk: nothing to compare it with"
    else:
        result = diff_builds(layout.build_path(root, old), layout.build_path(root, new))
    return page(request, "diff.html", {"served": served, "result": result, "ids": ids,
                                       "old": old, "new": new, "problem": problem},
                switch="/diff")


def eval_page(request: Request) -> HTMLResponse:
    served = explorer(request).get(param(request, "pack"))
    saved = (layout.latest_eval_report(served.root, served.pack.manifest.build_id)
             if served.root else None)
    build_id, report = saved if saved else (None, None)
    metrics = sorted({k for q in (report or {}).get("per_question", [])
                      for k in q.get("metrics", {})}, key=_metric_order)
    return page(request, "eval.html", {"served": served, "report": report,
                                       "build_id": build_id, "metrics": metrics},
                switch="/eval")


def _metric_order(name: str) -> tuple:
    head, _, k = name.partition("@")
    return (head, int(k) if k.isdigit() else 0)
