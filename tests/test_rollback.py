"""No silent rollback and no silent unchecked signature (packs/rollback.py,
packs/signing.py): an older build, correctly signed by the same key, is not installed over
a newer one unless asked (exit 2 naming both), a pack folder whose `current` was moved
back is refused by a reader that checks signatures, and a signed pack used without
--trust says that its signature was not checked."""

from __future__ import annotations

import json
import logging

import pytest
from query_fixtures import embedder, pack_dir  # noqa: F401 (fixtures)
from test_signing import BUILD, _kpack, _members, _rewrite, keys, signed  # noqa: F401

from packs import KnowledgePack, layout
from packs import format as fmt
from packs.install import install
from packs.rollback import DowngradeError
from packs.signing import load_private_key, sign


def _build(signed, keys, tmp_path, build_id: str, built_at: str):
    """The signed archive as build `build_id` built at `built_at`, signed again with the
    same key: a genuine build of the same pack, older or newer."""
    key = load_private_key(keys[0])

    def rename(members: dict[str, bytes]) -> None:
        for name in list(members):
            if name.startswith(BUILD + "/"):
                members[name.replace(BUILD, f"kestrel/builds/{build_id}")] = members.pop(name)
        base = f"kestrel/builds/{build_id}"
        manifest = json.loads(members[f"{base}/{fmt.MANIFEST_FILE}"])
        manifest.update(build_id=build_id, built_at=built_at)
        raw = json.dumps(manifest, indent=2).encode()
        members[f"{base}/{fmt.MANIFEST_FILE}"] = raw
        members[f"{base}/{fmt.SIGNATURE_FILE}"] = sign(raw, key)
        members[f"kestrel/{fmt.CURRENT_FILE}"] = f"{build_id}\n".encode()

    return _rewrite(signed, tmp_path / f"{build_id}.tar.gz", rename)


def test_an_older_signed_build_is_not_installed_over_a_newer_one(signed, keys, tmp_path):
    old = _build(signed, keys, tmp_path, "b0100", "2026-03-01T00:00:00+00:00")
    new = _build(signed, keys, tmp_path, "b0200", "2026-04-01T00:00:00+00:00")
    into = tmp_path / "installed"
    install(old, into, trust=keys[1])
    assert install(new, into, trust=keys[1]).previous_build == "b0100"
    with pytest.raises(DowngradeError, match="build b0100 .* is older than the installed "
                                             "current build b0200"):
        install(old, into, trust=keys[1])
    assert layout.current_id(into / "kestrel") == "b0200"
    res = _kpack("install", str(old), "--into", str(into), "--trust", str(keys[1]))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and "b0100" in lines[0] and "b0200" in lines[0]
    assert "--allow-downgrade" in lines[0]
    assert layout.current_id(into / "kestrel") == "b0200"
    assert install(new, into, trust=keys[1]).build_id == "b0200"  # the same build again: fine

    ok = _kpack("install", str(old), "--into", str(into), "--trust", str(keys[1]),
                "--allow-downgrade")
    assert ok.returncode == 0, ok.stderr
    assert "downgraded from build b0200; removed the newer build(s) b0200" in ok.stdout
    assert layout.current_id(into / "kestrel") == "b0100"
    assert layout.build_ids(into / "kestrel") == ["b0100"]
    with KnowledgePack.open(into / "kestrel", trust=keys[1]) as kp:  # a chosen downgrade
        assert kp.manifest.build_id == "b0100"


def test_a_current_moved_back_by_hand_is_refused_by_a_reader_with_trust(signed, keys,
                                                                        tmp_path):
    into = tmp_path / "installed"
    install(_build(signed, keys, tmp_path, "b0100", "2026-03-01T00:00:00+00:00"), into)
    install(_build(signed, keys, tmp_path, "b0200", "2026-04-01T00:00:00+00:00"), into)
    pack = into / "kestrel"
    layout.set_current(pack, "b0100")  # what a rollback without kpack install looks like
    with pytest.raises(DowngradeError, match="current names build b0100 .* but build b0200"):
        KnowledgePack.open(pack, trust=keys[1])
    for command in (["search", str(pack), "how are jobs retried?"], ["verify", str(pack)]):
        res = _kpack(*command, "--trust", str(keys[1]))
        assert res.returncode == 2 and "a rollback?" in res.stderr, (command, res.stderr)
    with KnowledgePack.open(pack, trust=keys[1], allow_downgrade=True) as kp:
        assert kp.manifest.build_id == "b0100"
    with KnowledgePack.open(layout.build_path(pack, "b0100"), trust=keys[1]) as kp:
        assert kp.manifest.build_id == "b0100"  # a build folder named on purpose
    # an unsigned "newer" build beside it proves nothing: no refusal on its account
    layout.set_current(pack, "b0200")
    (layout.build_path(pack, "b0200") / fmt.SIGNATURE_FILE).unlink()
    layout.set_current(pack, "b0100")
    KnowledgePack.open(pack, trust=keys[1]).close()


def test_a_signed_pack_used_without_trust_says_it_was_not_checked(signed, keys, tmp_path,
                                                                  caplog, pack_dir):
    from packs.signing import key_id, load_public_key

    kid = key_id(load_public_key(keys[1]))
    res = _kpack("install", str(signed), "--into", str(tmp_path / "cli"))
    assert res.returncode == 0, res.stderr
    assert f"signed by key {kid}, not checked (pass --trust" in res.stdout
    assert res.stderr == ""  # said once, by install, not by the pack it opened to check
    pack = tmp_path / "cli" / "kestrel"
    with caplog.at_level(logging.WARNING, logger="kpack.pack"):
        with KnowledgePack.open(pack) as kp:
            assert kp.signature == {"key_id": kid, "checked": False}
    assert f"signed by key {kid}, not checked" in caplog.text
    query = _kpack("search", str(pack), "how are jobs retried?")
    assert query.returncode == 0 and f"signed by key {kid}, not checked" in query.stderr
    trusted = _kpack("search", str(pack), "how are jobs retried?", "--trust", str(keys[1]))
    assert trusted.returncode == 0 and "not checked" not in trusted.stderr
    with KnowledgePack.open(pack, trust=keys[1]) as kp:
        assert kp.signature == {"key_id": kid, "checked": True}
    with KnowledgePack.open(pack_dir) as kp:
        assert kp.signature is None  # unsigned: nothing to say
    verify = _kpack("verify", str(pack))
    assert f"signed by key {kid}, not checked" in verify.stdout
