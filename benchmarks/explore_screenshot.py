"""The README's screenshot of the explorer's /ask page: docs/explore-ask.png.

    python benchmarks/explore_screenshot.py [--pack PACK_DIR] [--question TEXT]
                                            [--out docs/explore-ask.png]

Builds the example pack (sources/example: this project's own docs, the offline model and
extractor, as `make demo` does) into a temporary folder unless --pack names one, serves it
with the explorer as `kpack explore` does, asks the question in Chromium
(/usr/bin/chromium) through the page's own form, and saves what the window shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.explore_latency import CHROMIUM, CHROMIUM_ARGS, serve  # noqa: E402

QUESTION = "How do I choose an embedding model when I have no internet?"


def build_example(tmp: Path) -> Path:
    """`kpack build sources/example` of a copy of the example and the docs it reads (so
    the page shows no path of this checkout), with the CLI of this interpreter's venv."""
    copy = tmp / "knowledge-packs"
    shutil.copytree(ROOT / "sources/example", copy / "sources/example")
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("*.png"))
    kpack = Path(sys.executable).with_name("kpack")
    subprocess.run([str(kpack), "build", str(copy / "sources/example"), "--out",
                    str(tmp / "out")], check=True)
    return tmp / "out" / "example"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", type=Path, default=None)
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--out", type=Path, default=ROOT / "docs/explore-ask.png")
    args = ap.parse_args(argv)
    if not CHROMIUM.exists():
        print("skipped: no /usr/bin/chromium (apt-get install chromium)")
        return 0
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="kpack-shot-") as tmp:
        pack = args.pack or build_example(Path(tmp))
        base, _, stop = serve([pack])
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 1280})
                page.goto(base + "/")
                page.get_by_label("question").fill(args.question)
                page.get_by_role("button", name="Ask").click()
                page.wait_for_selector("#answer")
                page.locator("#answer a.cite-marker").first.click()
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(args.out))
                browser.close()
        finally:
            stop()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
