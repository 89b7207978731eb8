"""Credentials are never stored (#37): `user:password@` in urls.txt is stripped before
anything records it, and a site that needs credentials gets a header from an environment
variable ([[auth]] in pack.toml) that no pack, log, work file or Prefect record holds."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from packs.urls import canonical_url, strip_userinfo
from tasks.fetch.pages import FetchConfig, fetch_pages
from tasks.fetch.types import HostAuth
from tasks.sources import SourceError, load_config, parse_urls
from tests.loopback_site import LoopbackSite

SECRET_PASSWORD = "hunter2-pw-5829"
TOKEN = "tok-7311-secret"
PAGE = b"# Kettles\n\nA kettle boils water for tea. Descale it monthly.\n\n## Descaling\n\nUse vinegar.\n"


def test_userinfo_is_stripped_when_urls_txt_is_read(tmp_path, caplog) -> None:
    origin = tmp_path / "urls.txt"
    text = (f"https://user:{SECRET_PASSWORD}@docs.example.com/a\n"
            "https://docs.example.com/a\n"  # the same page: one entry
            f"http://only-user@docs.example.com/b?q=1#x\n")
    with caplog.at_level(logging.WARNING, logger="kpack.sources"):
        entries = parse_urls(text, origin)
    assert [e.url for e in entries] == ["https://docs.example.com/a",
                                        "http://docs.example.com/b?q=1#x"]
    assert "removed the user name and password" in caplog.text
    assert SECRET_PASSWORD not in caplog.text and "only-user" not in caplog.text
    with pytest.raises(SourceError) as err:
        parse_urls(f"ftp://user:{SECRET_PASSWORD}@host/x\n", origin)
    assert SECRET_PASSWORD not in str(err.value)


def test_identity_is_stable_without_userinfo() -> None:
    with_creds = f"https://u:{SECRET_PASSWORD}@Docs.Example.com:443/a/index.html"
    assert canonical_url(with_creds) == canonical_url(strip_userinfo(with_creds))
    assert strip_userinfo("http://[::1]:8080/p@q") == "http://[::1]:8080/p@q"
    assert strip_userinfo("https://a@b@host/x") == "https://host/x"


def test_auth_config_is_typed_and_names_the_variable_never_the_value(tmp_path,
                                                                     monkeypatch) -> None:
    toml = tmp_path / "pack.toml"
    toml.write_text('[[auth]]\nhost = "Docs.Example.com"\nenv = "DOCS_TOKEN"\n'
                    'scheme = "bearer"\n')
    (auth,) = load_config(toml).auth
    assert (auth.host, auth.header, auth.https_only) == ("docs.example.com", "Authorization", True)
    monkeypatch.delenv("DOCS_TOKEN", raising=False)
    with pytest.raises(ValueError, match=r"reads \$DOCS_TOKEN, which is not set"):
        auth.value()
    monkeypatch.setenv("DOCS_TOKEN", TOKEN + "\nX-Evil: 1")
    with pytest.raises(ValueError, match="line break") as err:
        auth.value()
    assert TOKEN not in str(err.value)
    monkeypatch.setenv("DOCS_TOKEN", "user:pw")
    assert HostAuth(host="h", env="DOCS_TOKEN", scheme="basic").value() == "Basic dXNlcjpwdw=="
    for bad in ('host = "https://x.com/"', 'header = "Host"', 'env = "NOT-A-NAME"',
                'password = "x"'):
        toml.write_text(f'[[auth]]\nhost = "x.com"\nenv = "T"\n{bad}\n'.replace(
            'host = "x.com"\n' if bad.startswith("host") else "\x00", ""))
        with pytest.raises(SourceError, match="auth"):
            load_config(toml)


def test_the_header_goes_to_its_host_only_and_never_over_plain_http(monkeypatch) -> None:
    monkeypatch.setenv("TEA_TOKEN", TOKEN)
    site = LoopbackSite()
    site.route("/page.md", lambda r: r.send(200, PAGE, "text/markdown"))
    for_loopback = HostAuth(host="127.0.0.1", env="TEA_TOKEN", scheme="bearer",
                            https_only=False)
    https_only = HostAuth(host="localhost", env="TEA_TOKEN")
    config = FetchConfig(allow_private_hosts=True, respect_robots=False,
                         auth=(for_loopback, https_only))
    with site:
        pages = fetch_pages([site.url("/page.md"), site.url("/page.md", host="localhost")],
                            config)
        assert [p.status for p in pages] == ["ok", "ok"]
        sent = [h.get("authorization") for h in site.headers_for("/page.md")]
        assert sorted(sent, key=str) == sorted([f"Bearer {TOKEN}", None], key=str)
        monkeypatch.delenv("TEA_TOKEN")
        (page,) = fetch_pages([site.url("/page.md")], config)
    assert page.status == "failed" and "$TEA_TOKEN, which is not set" in page.error


def test_credentials_in_a_redirect_are_neither_sent_nor_recorded() -> None:
    site = LoopbackSite()
    target = site.url("/page.md").replace("http://", f"http://u:{SECRET_PASSWORD}@")
    site.route("/old", lambda r: r.send(301, b"", headers={"Location": target}))
    site.route("/page.md", lambda r: r.send(200, PAGE, "text/markdown"))
    with site:
        (page,) = fetch_pages([site.url("/old")],
                              FetchConfig(allow_private_hosts=True, respect_robots=False))
    assert page.status == "ok" and page.final_url == site.url("/page.md")
    assert all("authorization" not in h for h in site.headers_for("/page.md"))


def _every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_build_stores_no_credentials_anywhere(prefect_harness, tmp_path,
                                                monkeypatch) -> None:
    """The probe: `http://user:password@host/...` in urls.txt put the password into
    manifest.json, tables/articles.parquet and pack.db. Now neither it nor the [[auth]]
    token is in the pack, its history, the work folder or the run's Prefect artifacts."""
    from prefect.client.orchestration import get_client

    from flows.build import run_build
    from tests.conftest import OFFLINE_MODEL

    monkeypatch.setenv("TEA_TOKEN", TOKEN)
    site = LoopbackSite()
    site.route("/public.md", lambda r: r.send(200, PAGE, "text/markdown"))

    def private(r) -> None:
        if r.headers.get("authorization") == f"Bearer {TOKEN}":
            r.send(200, PAGE.replace(b"Kettles", b"Teapots"), "text/markdown")
        else:
            r.send(401, b"who are you?", "text/plain")

    site.route("/private.md", private)
    source = tmp_path / "tea"
    source.mkdir()
    (source / "urls.txt").write_text(
        f"{site.url('/public.md').replace('http://', f'http://user:{SECRET_PASSWORD}@')}\n"
        f"{site.url('/private.md')}\n")
    (source / "pack.toml").write_text(
        f'allow_private_hosts = true\nembedding_model = "{OFFLINE_MODEL}"\n'
        'extractor = "offline"\nfetch_timeout_s = 5\n\n[[auth]]\nhost = "127.0.0.1"\n'
        'env = "TEA_TOKEN"\nscheme = "bearer"\nhttps_only = false\n')
    out, work = tmp_path / "out", tmp_path / "work"
    with site:
        result = run_build(source, out, work_dir=work)
    # The host's [[auth]] header, never Basic auth made from the stripped user:password.
    assert {h.get("authorization") for h in site.headers_for("/public.md")} == {f"Bearer {TOKEN}"}
    everything = _every_byte(out) + _every_byte(work)
    assert b"Teapots" in _every_byte(out)  # the private page was fetched with the token
    for secret in (SECRET_PASSWORD, TOKEN):
        assert secret.encode() not in everything, secret
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_flow_runs() if r.name == f"tea-{result['build_id']}"]
        artifacts = client.read_artifacts()
    recorded = repr([r.parameters for r in runs]) + repr([a.data for a in artifacts])
    assert runs and SECRET_PASSWORD not in recorded and TOKEN not in recorded
