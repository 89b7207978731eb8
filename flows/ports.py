"""Claiming a loopback port for a server, and saying who holds one that is taken.

Two `kpack server start` on one port at the same moment used to both report success: each
checked that the port was free, then let its server bind it later, and the loser's
server died while the winner's answered the health check for both. Here the starter
binds and listens itself, before anything starts, and hands the listening socket to the
server process: the kernel lets exactly one listener have the port, so the loser knows
at once and can name the owner.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

HOST = "127.0.0.1"
OWNER_WAIT_S = 1.0  # how long owner() looks for a holder that has bound but not listened
IDENTITY_PATH = "/kpack-identity"  # where a kpack server says who it is (flows/server_main.py)


class PortTakenError(OSError):
    """The port is held by another listener; the message names it when it can."""


def claim(port: int, backlog: int = 2048) -> socket.socket:
    """A socket bound to 127.0.0.1:`port` (0: any free port) and listening, inheritable,
    so a child process can serve on it. Raises PortTakenError naming the owner."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # SO_REUSEADDR lets a server restart over connections in TIME_WAIT; on Linux it never
    # lets two sockets listen on one port (only SO_REUSEPORT would).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise PortTakenError(f"port {port} on {HOST} is taken by {owner(port)}; "
                                 "pick another with --port") from None
        raise
    sock.set_inheritable(True)
    return sock


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes of TCP listeners on `port` (any address), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and \
                    int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def holders(port: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes of this user that hold a listener on `port`
    (Linux /proc; empty elsewhere or when the holder belongs to another user)."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    found = []
    if not wanted:
        return found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fds = os.scandir(f"/proc/{entry.name}/fd")
            held = any(os.readlink(fd.path) in wanted for fd in fds)
        except OSError:
            continue
        if held:
            found.append((int(entry.name), cmdline(int(entry.name))))
    return found


def owner(port: int) -> str:
    """Who holds `port`, in words: a kpack server (its PREFECT_HOME and pid), another
    process (pid and command), or "a process this user cannot see"."""
    ident = identify(f"http://{HOST}:{port}", timeout_s=1.0)
    if ident:
        return (f"the kpack Prefect server of PREFECT_HOME={ident.get('home')} "
                f"(pid {ident.get('pid')})")
    procs = holders(port)
    deadline = time.monotonic() + OWNER_WAIT_S
    while not procs and time.monotonic() < deadline:
        # A socket bound but not yet listening is in no table of /proc/net: the other
        # starter may be between its bind and its listen (a test met that moment).
        time.sleep(0.05)
        procs = holders(port)
    if procs:
        # the server process rather than the starter that handed it the socket
        pid, cmd = max(procs, key=lambda p: "flows.server_main" in p[1])
        args = cmd.split()
        if "flows.server_main" in args and "--home" in args[:-1]:
            home = args[args.index("--home") + 1]
            return f"the kpack Prefect server of PREFECT_HOME={home} (pid {pid}, starting)"
        return f"pid {pid} ({cmd[:120]})"
    return "a process this user cannot see"


def http_get(url: str, timeout_s: float) -> tuple[int, bytes] | None:
    """(status, body) of a plain GET, or None when nothing answers. The standard library's
    client: an httpx client builds an SSL context first (0.1-0.2 s), and every build asks."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        conn.request("GET", parts.path or "/")
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def identify(root: str, timeout_s: float = 2.0) -> dict | None:
    """What the kpack server at `root` (http://127.0.0.1:PORT) says it is: pid, home,
    token, port; None when nothing, or no kpack server, answers there."""
    got = http_get(root + IDENTITY_PATH, timeout_s)
    try:
        data = json.loads(got[1]) if got and got[0] == 200 else None
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("kpack") == 1 else None
