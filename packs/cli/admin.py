"""`kpack diff | inspect | verify | mcp | keygen | pack | install | list`: look into packs,
serve them to agents, and ship them as archives (signed: packs/signing.py).

Thin commands, `--json` for machines; exit codes as in packs/cli/common.py. Bad input
for diff, inspect and verify is what it is for build and query; for the others it is an
unreadable pack, a refused or mismatched archive, a missing file or a bad value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from packs.cli.common import (
    TRUST_HELP,
    UNVERIFIED_HELP,
    fail,
    open_checks,
    print_json,
    query_input_errors,
)

MAX_SIZE_ENV = "KPACK_MAX_INSTALL_SIZE"


def _distribute_input_errors() -> tuple[type[BaseException], ...]:
    from packs.archive import ArchiveError
    from packs.embedding import EmbeddingModelError
    from packs.format import PackFormatError

    return (ArchiveError, PackFormatError, EmbeddingModelError, FileNotFoundError,
            FileExistsError, ValueError)


def _fail(exc: BaseException) -> NoReturn:
    fail(exc, _distribute_input_errors())


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def diff(
    old: Annotated[Path, typer.Argument(help="Old pack or build folder.")],
    new: Annotated[Path, typer.Argument(help="New pack or build folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
) -> None:
    """Pages, sections and entities added, changed and removed between two builds."""
    try:
        from packs.diff import diff_builds, summary_line
        from packs.layout import resolve_build_dir

        result = diff_builds(resolve_build_dir(old), resolve_build_dir(new))
    except Exception as exc:  # the CLI edge
        fail(exc, query_input_errors())
    if as_json:
        print_json(result)
        return
    typer.echo(summary_line(result))
    for key, mark in (("pages_added", "+"), ("pages_changed", "~"), ("pages_removed", "-")):
        for url in result[key]:
            typer.echo(f"  {mark} {url}")


def inspect(
    pack: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Show a pack's manifest: build, counts, model, extractor, sources."""
    try:
        from packs.layout import resolve_build_dir
        from packs.manifest import read_manifest

        manifest = read_manifest(resolve_build_dir(pack))
    except Exception as exc:  # the CLI edge
        fail(exc, query_input_errors())
    if as_json:
        print_json(manifest.model_dump())
        return
    m = manifest
    typer.echo(f"{m.name}: build {m.build_id} at {m.built_at}{' (PARTIAL)' if m.partial else ''}")
    if m.description:
        typer.echo(f"  {m.description}")
    typer.echo("  counts: " + ", ".join(f"{k} {v}" for k, v in m.counts.model_dump().items()))
    typer.echo(f"  embedding: {m.embedding.model} (dim {m.embedding.dim})")
    typer.echo(f"  extractor: {m.extractor.kind} {m.extractor.model or ''} {m.extractor.note}".rstrip())
    ok = sum(s.status in ("ok", "not_modified") for s in m.sources)
    typer.echo(f"  sources: {ok}/{len(m.sources)} fetched")
    for s in m.sources:
        if s.status not in ("ok", "not_modified"):
            typer.echo(f"    {s.status}: {s.url}: {s.error}")
    if m.freshness is not None:
        _echo_freshness(m.freshness)
    typer.echo("  durations: " + ", ".join(f"{k} {v:.1f}s" for k, v in m.durations.items()))


def _echo_freshness(fresh) -> None:
    """`kpack inspect`'s lines on what the build did with each page, its sitemaps and
    the hosts' lastmod verdicts (manifest `freshness`)."""
    typer.echo(f"  {fresh.pages.line() or 'pages: none fetched'}")
    maps = fresh.sitemaps
    if maps is not None:
        typer.echo(f"  sitemaps: {maps.files} files ({maps.not_modified} not modified, "
                   f"{maps.failed} failed), {maps.listed} pages listed, {maps.pages} kept")
        for failure in maps.failures:
            typer.echo(f"    failed: {failure.url}: {failure.error}")
    for host, h in fresh.lastmod_hosts.items():
        use = "skipped by lastmod" if h.trusted else "asked conditionally"
        nxt = "trusted" if h.verdict else "not trusted"
        typer.echo(f"  lastmod {host}: {use}; next build: {nxt} ({h.reason})")


def verify(
    pack: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help="Check what the manifest lists even when it has no checksums or leaves files out (exit 0).")] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help="Also require the manifest's signature by this public key (repeatable: any of them).")] = None,
) -> None:
    """Check every file of a pack's build against the checksums in its manifest (opening a
    pack hashes only the files a query reads). Exit 2 lists every damaged file, one line
    each, then the error line; or names a manifest without checksums or that leaves files
    out (unless --allow-unverified), or a signature that is missing or not by a --trust
    key."""
    from packs.integrity import PackCorruptError

    try:
        from packs import signing
        from packs.integrity import verify as verify_files
        from packs.layout import resolve_build_dir
        from packs.manifest import read_manifest

        build = resolve_build_dir(pack)
        manifest = (signing.read_trusted_manifest(build, trust) if trust
                    else read_manifest(build))
        if trust and pack.expanduser().resolve() != build.resolve():
            from packs.rollback import newer_trusted

            newer_trusted(build, manifest, trust)  # current moved back: a rollback
        checked = verify_files(build, manifest.checksums, allow_unverified=allow_unverified)
        signature = signing.read_signature(build)
    except PackCorruptError as exc:
        for line in exc.damaged:
            typer.echo(f"damaged: {line}", err=True)
        if exc.damaged:  # listed above: the error line only counts them
            exc = PackCorruptError(f"{build}: {len(exc.damaged)} of "
                                   f"{len(manifest.checksums)} files are damaged (listed "
                                   "above); reinstall or rebuild the pack")
        fail(exc, query_input_errors())
    except Exception as exc:  # the CLI edge
        fail(exc, query_input_errors())
    if not checked:
        typer.echo(f"unverified: {build}: this build has no checksums (built before they were "
                   "recorded); nothing to verify")
        return
    signed = (f"; signed by trusted key {signature['key_id']}" if trust
              else f"; signed by key {signature['key_id']}, not checked (pass --trust)"
              if signature else "; not signed")
    typer.echo(f"ok: {build}: {len(checked)} files match their checksums{signed}")


def mcp(
    packs: Annotated[list[Path], typer.Argument(help="Pack folders to serve (one or more).")],
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")] = False,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port for --http (the endpoint is /mcp).")] = 8765,
    embedding_model: Annotated[str | None, typer.Option(help="Local copy of the packs' model.")] = None,
    allow_unverified: Annotated[bool, typer.Option("--allow-unverified", help=UNVERIFIED_HELP)] = False,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help=TRUST_HELP)] = None,
) -> None:
    """Run an MCP server over PACKS with tools list_packs, pack_info, search and ask.

    Stdio by default (for an agent that launches it); --http listens on 127.0.0.1 only, without authentication. Every pack is opened, and its model loaded, before serving.
    """
    try:
        from packs.mcp_server import serve

        serve(packs, http=http, port=port, embedding_model=embedding_model,
              **open_checks(allow_unverified, trust))
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # the CLI edge
        _fail(exc)


def keygen(
    key: Annotated[Path, typer.Argument(help="Private key file to write (the public key goes to KEY.pub).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Make an Ed25519 key pair for signing packs: KEY (private, mode 0600; encrypted when KPACK_SIGNING_PASSPHRASE is set) and KEY.pub (give it to whoever installs your packs)."""
    try:
        from packs.signing import generate_keypair

        private, public, kid = generate_keypair(key)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        print_json({"private_key": str(private), "public_key": str(public), "key_id": kid})
        return
    typer.echo(f"wrote {private} (private: keep it secret) and {public} (public); key id {kid}")


def pack(
    pack_dir: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Archive path (NAME.tar.gz) or a folder; default ./<name>-<build>.tar.gz.")] = None,
    sign: Annotated[Path | None, typer.Option("--sign", metavar="KEY", help="Sign the manifest with this Ed25519 private key (kpack keygen); installs with --trust KEY.pub check it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Archive PACK_DIR's current build as a .tar.gz, with its sha256 in NAME.tar.gz.sha256; every file is checked against the manifest first."""
    try:
        from packs.archive import pack_archive

        rec = pack_archive(pack_dir, out, sign_key=sign)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        print_json({**rec.__dict__, "path": str(rec.path),
                     "checksum_path": str(rec.checksum_path)})
        return
    typer.echo(f"wrote {rec.path} ({_human(rec.size_bytes)}, {rec.files} files): "
               f"{rec.name} build {rec.build_id}")
    typer.echo(f"sha256 {rec.sha256} (in {rec.checksum_path})")
    if rec.signed_by:
        typer.echo(f"signed with key {rec.signed_by}")


def install(
    source: Annotated[str, typer.Argument(help="Archive path or http(s) URL.")],
    sha256: Annotated[str | None, typer.Option(help="Expected sha256 (hex); default: the .sha256 file next to the archive.")] = None,
    into: Annotated[Path, typer.Option(help="Folder the pack is installed into, as INTO/<name>/.")] = Path("out"),
    max_size: Annotated[str, typer.Option(envvar=MAX_SIZE_ENV, help="Refuse archives that expand (or download) past this size, e.g. 500M, 4G.")] = "4G",
    timeout: Annotated[float, typer.Option(help="Network timeout per connect/read, seconds (the whole download gets 10x).")] = 60.0,
    trust: Annotated[list[Path] | None, typer.Option("--trust", metavar="PUBKEY", help="Refuse the pack unless its manifest is signed by this public key (repeatable: any of them).")] = None,
    allow_downgrade: Annotated[bool, typer.Option("--allow-downgrade", help="Install a build older than the installed current one (and remove the newer builds).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Verify an archive's checksum, contents and (with --trust) signature, then install it atomically into INTO/<name>/.

    Refused: a missing or mismatched checksum, absolute paths, '..', links, devices, anything outside <name>/current and <name>/builds/<id>/, archives over --max-size, pack formats this version cannot read, a file that does not match the manifest, with --trust an unsigned pack or one not signed by a trusted key, and a build older than the installed current one (exit 2, naming both) unless --allow-downgrade. A refused install leaves INTO as it was. A signed pack installed without --trust says that its signature was not checked.
    """
    try:
        from packs.install import install as install_archive
        from packs.install import parse_size

        rec = install_archive(source, into, sha256=sha256, max_bytes=parse_size(max_size),
                              timeout_s=timeout, trust=trust or None,
                              allow_downgrade=allow_downgrade)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        print_json({**rec.__dict__, "path": str(rec.path)})
        return
    replaced = f" (was build {rec.previous_build})" if rec.previous_build else ""
    if rec.removed_builds:
        replaced = (f" (downgraded from build {rec.previous_build}; removed the newer "
                    f"build(s) {', '.join(rec.removed_builds)})")
    signed = (f", signed by trusted key {rec.signed_by}" if rec.signed_by
              else f"; signed by key {rec.signed_unchecked}, not checked (pass --trust "
                   "KEY.pub to check it)" if rec.signed_unchecked else "")
    typer.echo(f"installed {rec.name} build {rec.build_id} into {rec.path}{replaced}; "
               f"sha256 verified{signed}")


def list_(
    folder: Annotated[Path, typer.Argument(help="Folder of installed packs (or one pack).")] = Path("out"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the packs in FOLDER: name, build time, counts, embedding model and size on disk."""
    try:
        from packs.install import list_packs

        entries = list_packs(folder)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        typer.echo(f"no packs in {folder}")
        return
    for e in entries:
        if e.error:
            typer.echo(f"{e.name}  UNREADABLE  {_human(e.size_bytes)}  {e.error}")
            continue
        c = e.counts
        typer.echo(f"{e.name}  build {e.build_id}  built {e.built_at}  "
                   f"{c.get('articles', 0)} articles, {c.get('sections', 0)} sections, "
                   f"{c.get('entities', 0)} entities  {e.embedding_model}  "
                   f"{_human(e.size_bytes)}")


def register(app: typer.Typer) -> None:
    """Add diff, inspect, verify, mcp, keygen, pack, install and list to `app`."""
    for name, command in (("diff", diff), ("inspect", inspect), ("verify", verify),
                          ("mcp", mcp), ("keygen", keygen), ("pack", pack),
                          ("install", install), ("list", list_)):
        app.command(name=name)(command)
