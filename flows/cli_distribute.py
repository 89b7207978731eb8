"""`kpack mcp | pack | install | list`: serve packs to agents, and ship them as archives.

`register(app)` adds the four commands to the main `kpack` app (flows/cli.py). Same
conventions as there: thin commands, `--json` for machines, exit codes 0 success, 1 the
work failed (network, a server that crashed), 2 bad input (unreadable pack, refused or
mismatched archive, missing file). KPACK_DEBUG=1 re-raises instead of printing one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
MAX_SIZE_ENV = "KPACK_MAX_INSTALL_SIZE"


def _fail(exc: BaseException) -> None:
    from packs.archive import ArchiveError
    from packs.embedding import EmbeddingModelError
    from packs.format import PackFormatError

    if os.environ.get("KPACK_DEBUG"):
        raise exc
    bad_input = (ArchiveError, PackFormatError, EmbeddingModelError, FileNotFoundError,
                 ValueError)
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT if isinstance(exc, bad_input) else EXIT_FAILED)


def _print_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def mcp(
    packs: Annotated[list[Path], typer.Argument(help="Pack folders to serve (one or more).")],
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")] = False,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port for --http (the endpoint is /mcp).")] = 8765,
    embedding_model: Annotated[Optional[str], typer.Option(help="Local copy of the packs' model.")] = None,
) -> None:
    """Run an MCP server over PACKS with tools list_packs, pack_info, search and ask.

    Stdio by default (for an agent that launches it); --http listens on 127.0.0.1 only, without authentication. Every pack is opened, and its model loaded, before serving.
    """
    try:
        from packs.mcp_server import serve

        serve(packs, http=http, port=port, embedding_model=embedding_model)
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # the CLI edge
        _fail(exc)

def pack(
    pack_dir: Annotated[Path, typer.Argument(help="Pack folder (or one build folder).")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Archive path (NAME.tar.gz) or a folder; default ./<name>-<build>.tar.gz.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Archive PACK_DIR's current build as a .tar.gz, with its sha256 in NAME.tar.gz.sha256."""
    try:
        from packs.archive import pack_archive

        rec = pack_archive(pack_dir, out)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        _print_json({**rec.__dict__, "path": str(rec.path),
                     "checksum_path": str(rec.checksum_path)})
        return
    typer.echo(f"wrote {rec.path} ({_human(rec.size_bytes)}, {rec.files} files): "
               f"{rec.name} build {rec.build_id}")
    typer.echo(f"sha256 {rec.sha256} (in {rec.checksum_path})")


def install(
    source: Annotated[str, typer.Argument(help="Archive path or http(s) URL.")],
    sha256: Annotated[Optional[str], typer.Option(help="Expected sha256 (hex); default: the .sha256 file next to the archive.")] = None,
    into: Annotated[Path, typer.Option(help="Folder the pack is installed into, as INTO/<name>/.")] = Path("out"),
    max_size: Annotated[str, typer.Option(envvar=MAX_SIZE_ENV, help="Refuse archives that expand (or download) past this size, e.g. 500M, 4G.")] = "4G",
    timeout: Annotated[float, typer.Option(help="Network timeout per connect/read, seconds (the whole download gets 10x).")] = 60.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Verify an archive's checksum and contents, then install it atomically into INTO/<name>/.

    Refused: a missing or mismatched checksum, absolute paths, '..', links, devices, anything outside <name>/current and <name>/builds/<id>/, archives over --max-size, and pack formats this version cannot read. A refused install leaves INTO as it was.
    """
    try:
        from packs.install import install as install_archive, parse_size

        rec = install_archive(source, into, sha256=sha256, max_bytes=parse_size(max_size),
                              timeout_s=timeout)
    except Exception as exc:  # the CLI edge
        _fail(exc)
    if as_json:
        _print_json({**rec.__dict__, "path": str(rec.path)})
        return
    replaced = f" (was build {rec.previous_build})" if rec.previous_build else ""
    typer.echo(f"installed {rec.name} build {rec.build_id} into {rec.path}{replaced}; "
               f"sha256 verified")


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
        _print_json([e.to_dict() for e in entries])
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
    """Add mcp, pack, install and list to `app`."""
    app.command(name="mcp")(mcp)
    app.command(name="pack")(pack)
    app.command(name="install")(install)
    app.command(name="list")(list_)
