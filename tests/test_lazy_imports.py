"""The build flow imports no SDK it may not need: `import flows.build` (every build, the
no-change rebuild included) loads neither the anthropic SDK (~2 s) nor trafilatura; the
SDK loads when a client is built. Checked in a fresh interpreter, since this test session
has loaded both long ago."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from query_fixtures import embedder, pack_dir  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
import flows.build
before = sorted(m for m in ("anthropic", "trafilatura") if m in sys.modules)
from packs.llm.client import new_client
new_client("test-key", base_url="http://127.0.0.1:9", timeout=1.0, max_retries=0)
print(json.dumps({"before": before, "after": "anthropic" in sys.modules}))
"""


def test_build_flow_import_loads_no_llm_sdk_until_a_client_is_built():
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1"}
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"before": [], "after": True}


SEARCH_PROBE = """
import json, sys
from packs.cli import main
try:
    main(["search", sys.argv[1], "How are jobs retried?", "--json"])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(
    m for m in sys.modules if m.split(".")[0] in ("tasks", "flows", "prefect", "torch"))}))
"""


def test_kpack_search_loads_nothing_of_the_build_side(pack_dir):
    """The runtime commands live on the query side: `kpack search` in the full install (where
    Prefect, torch and the build are all importable) loads none of them."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", SEARCH_PROBE, str(pack_dir)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"code": 0, "loaded": []}, proc.stderr[-2000:]
