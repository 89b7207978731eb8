"""Test-wide settings: offline model hub, no real API key, one Prefect server per session."""

from __future__ import annotations

import os
import tempfile
from collections import Counter

# Before anything imports prefect or sentence-transformers.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="kpack-prefect-home-"))
# The session's one SQLite-backed Prefect server stalled for minutes in a full run
# (2026-11-25: its event loop stuck in a bulk insert while a connection waited on the
# database lock) and builds waited on it. Run logs are a large share of what test builds
# write to it, and no test reads them from the API, so they stay on the console.
os.environ.setdefault("PREFECT_LOGGING_TO_API_ENABLED", "false")
# No background Prefect server or warm build process outlives a test: a build that finds
# no server starts a temporary one (flows/server.py). Tests of the kept server set their
# own value and stop what they start.
os.environ["KPACK_SERVER_IDLE_S"] = "0"
# Tests decide for themselves whether Claude is reachable.
for _var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "KPACK_EMBEDDING_MODEL"):
    os.environ.pop(_var, None)

from flows.settings import configure_prefect_env  # noqa: E402

configure_prefect_env()  # what every entry point applies (analytics off, ...)

import pytest  # noqa: E402

OFFLINE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API (SQLite) for every flow test of the session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


# The slowest files, in seconds of one worker (`--durations=0`, summed per file, a quiet
# full run on the 2-core VM, 2026-12-01). Handed out first, longest first: a long file
# that starts last keeps one worker busy after the other has finished (the alerts e2e
# file, 150 s in one test, ran near the end when files were ordered by test count).
SLOW_FILES = {
    "tests/test_benchmarks_tiny.py": 377, "tests/test_build_safety.py": 172,
    "tests/test_alerts_e2e.py": 153, "tests/test_shards.py": 146, "tests/test_server.py": 102,
    "tests/test_runtime_install.py": 101, "tests/test_integrity.py": 83,
    "tests/test_server_auth.py": 83, "tests/test_prefect_server.py": 71,
    "tests/test_query_pack.py": 69, "tests/test_warm.py": 63, "tests/test_build_e2e.py": 57,
}


def pytest_collection_modifyitems(config, items):
    """The slowest files first (SLOW_FILES, longest first), then files with more tests
    first, and the browser tests (those using pytest-playwright's `page`) last. Its sync
    Playwright is session-scoped and keeps its asyncio loop marked as running in the main
    thread until the session ends: every asyncio.run() after the first browser test (the
    MCP client, anyio, fetches inside a running loop) would fail, and Prefect's
    sync-or-async calls (Block.save) would hand back coroutines. Under pytest-xdist (make
    test: --dist loadfile --no-loadscope-reorder) every worker collects this order and
    files are handed out in it: the browser file is the last unit, and the worker that
    runs it runs nothing after it."""
    # pytest-playwright's `page` needs its `browser` (a test parametrized by "page" does not)
    browser = [item for item in items if "browser" in getattr(item, "fixturenames", ())]
    last = {id(item) for item in browser}
    rest = [item for item in items if id(item) not in last]
    per_file = Counter(item.nodeid.split("::")[0] for item in rest)

    def order(item) -> tuple[int, int]:
        file = item.nodeid.split("::")[0]
        return -SLOW_FILES.get(file, 0), -per_file[file]
    rest.sort(key=order)  # stable: files stay whole
    items[:] = rest + browser
