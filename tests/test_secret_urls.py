"""Secrets out of stored URLs (packs/urls.py, tasks/sources.py, tasks/fetch/): the value of
a secret-looking query parameter (?token=, &password=, a signed URL's X-Amz-Signature, a
name pack.toml's secret_params adds) becomes REDACTED before anything is stored, with a
warning, while the page is still requested as urls.txt writes it. End to end: a real
`kpack build` whose site answers only with the secrets (and echoes one, and redirects to
a signed URL), then every file of the output, the work dir and PREFECT_HOME (run logs
sent to the Prefect API) searched for them."""

from __future__ import annotations

import gzip
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from packs.urls import REDACTED, clean_url, is_secret_param, redact_secrets
from tasks.fetch.secret_urls import request_urls
from tasks.sources import parse_urls
from tests.conftest import OFFLINE_MODEL
from tests.loopback_site import LoopbackSite

REPO = Path(__file__).resolve().parents[1]
TOKEN, PASSWORD, API_KEY = "tok3nV4lueZq81", "pa55w0rdV4lueXy", "ap1K3yV4lueWv"
SIGNATURE, CREDENTIAL, CUSTOM = "s1gn4tur3V4lue", "cr3dV4lueAKIA", "cust0mRefV4lue"
PAGE_SIGNATURE = "pag3L1nkS1g"  # a signed link in a page's own text: the page's content
SECRETS = (TOKEN, PASSWORD, API_KEY, SIGNATURE, CREDENTIAL, CUSTOM)


def test_secret_looking_parameters_are_redacted_and_nothing_else_moves() -> None:
    url = ("https://docs.example.org/a?page=2&TOKEN=t1&api_key=k&Password=p&X-Amz-Signature=s"
           "&x-amz-credential=c&private_token=q&sort=asc#part")
    redacted, names = redact_secrets(url)
    assert redacted == ("https://docs.example.org/a?page=2&TOKEN=REDACTED&api_key=REDACTED"
                        "&Password=REDACTED&X-Amz-Signature=REDACTED&x-amz-credential=REDACTED"
                        "&private_token=REDACTED&sort=asc#part")
    assert names == ["TOKEN", "api_key", "Password", "X-Amz-Signature", "x-amz-credential",
                     "private_token"]
    assert redact_secrets("https://a.org/x?page=2&q=token") == ("https://a.org/x?page=2&q=token",
                                                                 [])
    for name in ("key", "apikey", "access_token", "auth", "passwd", "secret", "sig",
                 "signature", "X-Goog-Signature", "client_secret", "x-api-key"):
        assert is_secret_param(name), name
    assert not is_secret_param("session_ref") and is_secret_param("Session_Ref", ["session_ref"])
    assert clean_url("https://u:pw@a.org/x?sig=1") == f"https://a.org/x?sig={REDACTED}"


def test_urls_txt_records_the_redacted_url_with_a_warning_and_maps_it_back(tmp_path,
                                                                           caplog) -> None:
    origin = tmp_path / "urls.txt"
    text = (f"https://a.org/guide?token={TOKEN}&lang=en\n"
            f"sitemap: https://a.org/sitemap.xml?api_key={API_KEY}\n"
            f"https://a.org/x?session_ref={CUSTOM}\nhttps://a.org/plain\n")
    origin.write_text(text)
    with caplog.at_level(logging.WARNING, logger="kpack.sources"):
        entries = parse_urls(text, origin, ("session_ref",))
    assert [e.url for e in entries] == [
        "https://a.org/guide?token=REDACTED&lang=en", "https://a.org/sitemap.xml?api_key=REDACTED",
        "https://a.org/x?session_ref=REDACTED", "https://a.org/plain"]
    assert "?token= in https://a.org/guide?token=REDACTED&lang=en looks like a secret" \
        in caplog.text
    assert not any(s in caplog.text for s in SECRETS)
    assert request_urls(origin, ("session_ref",)) == {
        "https://a.org/guide?token=REDACTED&lang=en": f"https://a.org/guide?token={TOKEN}&lang=en",
        "https://a.org/sitemap.xml?api_key=REDACTED":
            f"https://a.org/sitemap.xml?api_key={API_KEY}",
        "https://a.org/x?session_ref=REDACTED": f"https://a.org/x?session_ref={CUSTOM}"}


def _site(loop: LoopbackSite) -> None:
    """Pages that answer only when the request carries their secrets; one echoes its token
    into a link and its text, one redirects to a signed URL, a sitemap needs a key."""
    def needs(*pairs: str, body: str, kind: str = "text/markdown"):
        def handler(req) -> None:
            if all(p in req.query.split("&") for p in pairs):
                req.send(200, body.encode(), kind)
            else:
                req.send(401, b"who are you?", "text/plain")
        return handler

    loop.route("/guide.md", needs(f"token={TOKEN}", f"password={PASSWORD}", body=(
        f"# Guide\n\n## Kettles\n\nA kettle boils water. See [the other page](other.md?token="
        f"{TOKEN}) and [a file](https://files.example/f?X-Amz-Signature={PAGE_SIGNATURE}).\n"
        f"\n## Session\n\nYour session token is {TOKEN}, do not share it.\n")))
    loop.route("/other.md", needs(f"token={TOKEN}", body="# Other\n\n## Teapots\n\nWarm the "
                                                         "teapot before brewing.\n"))
    loop.route("/custom.md", needs(f"session_ref={CUSTOM}", body="# Custom\n\n## Cups\n\n"
                                                                "Cups keep tea warm.\n"))
    loop.route("/redirect.md", lambda req: req.send(302, b"", None, {
        "Location": f"/final.md?X-Amz-Signature={SIGNATURE}&X-Amz-Credential={CREDENTIAL}"}))
    loop.route("/final.md", needs(f"X-Amz-Signature={SIGNATURE}", body="# Final\n\n## Mugs\n\n"
                                                                       "Mugs hold more tea.\n"))
    loop.route("/listed.md", lambda req: req.send(200, b"# Listed\n\n## Saucers\n\nSaucers "
                                                       b"catch drips.\n", "text/markdown"))
    loop.route("/sitemap.xml", needs(f"api_key={API_KEY}", kind="application/xml", body=(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>'
        f'{loop.url("/listed.md")}</loc></url></urlset>')))


def _readable(path: Path) -> bytes:
    """A file's bytes as a search can see them: Parquet decoded (its pages are
    compressed), gzip inflated."""
    data = path.read_bytes()
    if data[:4] == b"PAR1":
        import polars as pl

        frame = pl.read_parquet(path)
        return repr(frame.rows()).encode() + repr(frame.columns).encode()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    return data


def _hits(root: Path, secrets=SECRETS) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = _readable(path)
            found += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return found


def test_a_build_stores_no_secret_of_its_urls_anywhere(tmp_path) -> None:
    home, out, work = tmp_path / "home", tmp_path / "out", tmp_path / "work"
    with LoopbackSite() as loop:
        _site(loop)
        source = tmp_path / "sources" / "tea"
        source.mkdir(parents=True)
        (source / "urls.txt").write_text(
            f"{loop.url('/guide.md')}?token={TOKEN}&password={PASSWORD}\n"
            f"{loop.url('/other.md')}?token={TOKEN}\n"
            f"{loop.url('/redirect.md')}?token={TOKEN}\n"
            f"{loop.url('/custom.md')}?session_ref={CUSTOM}\n"
            f"sitemap: {loop.url('/sitemap.xml')}?api_key={API_KEY}\n")
        (source / "pack.toml").write_text(
            f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n'
            'extractor = "offline"\nsecret_params = ["session_ref"]\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update({"PREFECT_HOME": str(home), "KPACK_SERVER_IDLE_S": "0",
                    "PREFECT_LOGGING_TO_API_ENABLED": "true", "HF_HUB_OFFLINE": "1",
                    "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"})
        env.pop("KPACK_DEBUG", None)
        res = subprocess.run([sys.executable, "-m", "packs.cli", "build", str(source),
                              "--out", str(out), "--work-dir", str(work), "--strict"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "looks like a secret" in res.stderr
    printed = res.stdout + res.stderr
    assert not [s for s in SECRETS if s in printed]
    manifest = next((out / "tea" / "builds").glob("*/manifest.json")).read_text()
    assert '"status": "ok"' in manifest and '"status": "failed"' not in manifest  # fetched
    assert f"token={REDACTED}&password={REDACTED}" in manifest
    assert f"X-Amz-Signature={REDACTED}&X-Amz-Credential={REDACTED}" in manifest  # final_url
    with sqlite3.connect(home / "prefect.db") as db:  # the run logs did reach Prefect
        assert db.execute("select count(*) from log").fetchone()[0] > 0
    assert _hits(out) + _hits(work) + _hits(home) == []
    # What a page says is its own: a link in its text keeps its query (the links table
    # records it REDACTED); only the secrets the build was given or sent are scrubbed. The
    # text is in the sections and in the answer units quoting them (tables/units.jsonl).
    tables = next((out / "tea" / "builds").glob("*/tables"))
    assert sorted(_hits(tables, [PAGE_SIGNATURE])) == [
        f"{tables / name}: {PAGE_SIGNATURE}" for name in ("sections.parquet", "units.jsonl")]
