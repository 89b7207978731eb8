"""The explorer off loopback and across rebuilds (packs/explore/access.py, web.Explorer):
a token (then a cookie) on any other address, a warning and the URL with the token, the
Host check kept for the names it serves; and each pack folder's `current` followed, so a
rebuild is served without a restart and a pruned build never again."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import polars as pl
import pytest
from explore_fixtures import _second_kestrel_build, publish_tables
from query_fixtures import embedder, make_tables  # noqa: F401 (fixture)
from starlette.testclient import TestClient

from packs import format as fmt
from packs import layout
from packs.explore import access
from packs.explore.app import create_app
from packs.explore.cli import open_app
from packs.packset import PackSet

TOKEN = "t0ken-of-the-test"
OFF = "http://192.0.2.7:8765"  # a wildcard listen reached on this (documentation) address


@pytest.fixture(scope="module")
def kestrel(tmp_path_factory, embedder) -> Path:
    root = tmp_path_factory.mktemp("explore-access")
    return publish_tables(root, "kestrel", "b0001", make_tables(embedder), embedder,
                          "Kestrel job scheduler docs")


@pytest.fixture(scope="module")
def wildcard(kestrel):
    """The explorer as `kpack explore --host 0.0.0.0` makes it, under Starlette's test
    client (no socket is opened on any address)."""
    packset = PackSet.open([kestrel])
    app = create_app(packset, host="0.0.0.0", token=TOKEN, allow_hosts=("docs.internal",))
    yield app
    packset.close()


def test_off_loopback_every_request_wants_the_token_then_a_cookie(wildcard) -> None:
    with TestClient(wildcard, base_url=OFF, follow_redirects=False) as c:
        for path in ("/", "/ask?q=retries", "/static/explore.css", "/builds"):
            assert c.get(path).status_code == 401, path
        assert c.get("/?token=wrong").status_code == 401
        first = c.get(f"/ask?q=retries&token={TOKEN}&pack=kestrel")
        assert first.status_code == 303
        assert first.headers["location"] == "/ask?q=retries&pack=kestrel"  # token gone
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"kpack_explore_8765={TOKEN};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = c.get("/ask?q=retries&pack=kestrel")  # the cookie from now on
        assert page.status_code == 200 and 'data-kind="offline"' in page.text
    with TestClient(wildcard, base_url=OFF, cookies={"kpack_explore_9999": TOKEN}) as other:
        assert other.get("/").status_code == 401  # another port's explorer, another cookie


def test_off_loopback_the_host_check_stays_for_the_names_it_serves(wildcard) -> None:
    with TestClient(wildcard, base_url=OFF, cookies={"kpack_explore_8765": TOKEN}) as c:
        assert c.get("/").status_code == 200  # the address the connection reached
        for name in ("evil.example", "evil.example:8765", "192.0.2.99:8765"):
            assert c.get("/", headers={"host": name}).status_code == 400, name
        for name in (socket.gethostname(), "localhost:8765", "[::1]:8765",
                     "docs.internal:8765"):
            assert c.get("/", headers={"host": name}).status_code == 200, name
        assert c.get(f"/?token={TOKEN}", headers={"host": "evil.example"},
                     follow_redirects=False).status_code == 400


def test_off_loopback_needs_a_token_and_warns_with_the_url(kestrel) -> None:
    with PackSet.open([kestrel]) as packset, pytest.raises(ValueError, match="needs a token"):
        create_app(packset, host="0.0.0.0")
    warning, line = access.announce("0.0.0.0", "http://box:8765/", "a b/c")
    assert warning.startswith("warning: the explorer listens on 0.0.0.0, reachable from "
                              "the network")
    assert line == "http://box:8765/?token=a%20b%2Fc"
    assert access.announce("127.0.0.1", "http://127.0.0.1:8765/", None) == (
        None, "http://127.0.0.1:8765/")
    for host, loopback in (("127.0.0.1", True), ("::1", True), ("localhost", True),
                           ("127.0.0.2", True), ("::ffff:127.0.0.1", True),
                           ("0.0.0.0", False), ("::", False), ("192.0.2.7", False),
                           ("box.example", False)):
        assert access.is_loopback(host) is loopback, host


def test_kpack_explore_takes_a_token_from_the_environment(kestrel) -> None:
    """Over real HTTP: the token from $KPACK_EXPLORE_TOKEN (never on the command line, so
    not in `ps`), printed once in the URL, then a cookie."""
    kpack = Path(sys.executable).with_name("kpack")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "KPACK_EXPLORE_TOKEN": TOKEN}
    proc = subprocess.Popen([str(kpack), "explore", str(kestrel), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline().strip()
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/\?token={TOKEN}", line), line
        base = line.split("?")[0]
        assert httpx.get(base, timeout=30).status_code == 401
        with httpx.Client(timeout=30, follow_redirects=True) as client:
            assert client.get(line).status_code == 200  # 303, then the page with the cookie
            assert client.get(base + "builds").status_code == 200
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert out == "" and err == ""  # loopback: no warning, the URL once
    short = subprocess.run([str(kpack), "explore", str(kestrel), "--token", "abc"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert short.returncode == 2 and short.stderr.startswith("error: --token must be at "
                                                             "least 12"), short.stderr


# --- following `current` -----------------------------------------------------------------


def _section_id(build: Path, heading: str) -> str:
    sections = pl.read_parquet(build / fmt.TABLES_DIR / f"{fmt.SECTIONS}.parquet")
    return sections.filter(pl.col("heading_path") == heading)["id"][0]


def test_a_rebuild_is_served_without_a_restart_and_a_pruned_build_never(
        kestrel, embedder, tmp_path) -> None:
    root = tmp_path / "kestrel"
    shutil.copytree(kestrel, root)
    app, packset = open_app([root])
    try:
        with TestClient(app, base_url="http://127.0.0.1") as c:
            assert "b0001" in c.get("/").text
            publish_tables(tmp_path, "kestrel", "b0005", _second_kestrel_build(embedder),
                           embedder, "Kestrel job scheduler docs", previous="b0001")
            layout.prune(root, 1)  # keep_builds = 1: b0001 is gone from disk
            assert not layout.build_path(root, "b0001").exists()
            cron = _section_id(layout.build_path(root, "b0005"), "Scheduling > Cron jobs")
            page = c.get(f"/section/{cron}")
            assert page.status_code == 200 and "cron schedule" in page.text
            assert "b0005" in c.get("/").text
            assert c.get("/ask", params={"q": "How is a job retried?"}).status_code == 200
            assert app.state.explorer.get("kestrel").pack.path.name == "b0005"

            # A current build that does not open (damaged) is an error naming why, and
            # the build before it is not served in its place.
            publish_tables(tmp_path, "kestrel", "b0007", make_tables(embedder), embedder)
            db = layout.build_path(root, "b0007") / fmt.DB_FILE
            db.write_bytes(b"\0" * db.stat().st_size)
            broken = c.get(f"/section/{cron}")
            assert broken.status_code == 500 and "b0007" in broken.text, broken.text[:500]
            assert "cannot be opened" in broken.text
            assert c.get("/ask?q=cron").status_code == 500
            layout.set_current(root, "b0005")  # put back by hand: served again
            assert c.get(f"/section/{cron}").status_code == 200
    finally:
        app.state.explorer.close()
        packset.close()
