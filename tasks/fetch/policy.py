"""Pure rules for the fetch stage: which URLs and addresses may be fetched, GitHub rewrites,
redaction. No I/O here; `tasks.fetch.pages` calls these from its network shell. When to
retry is the one policy in `packs.retry`.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from packs.urls import clean_url

DEFAULT_GITHUB_RAW_BASE = "https://raw.githubusercontent.com"
GITHUB_HOSTS = frozenset({"github.com", "www.github.com"})

# Cloud instance-metadata endpoints: refused even when private hosts are allowed, because
# a redirect there from an "allowed" internal site is the classic SSRF credential theft.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)

PRIVATE_HINT = "set allow_private_hosts = true in pack.toml or --allow-private-hosts"

REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})


def address_refusal(address: str, *, allow_private: bool) -> str | None:
    """Why `address` (an IP literal) must not be contacted, or None if it may.

    Metadata endpoints are always refused; private, loopback, link-local, multicast,
    reserved and unspecified addresses are refused unless `allow_private`. An IPv4-mapped
    IPv6 address is judged as the IPv4 address it maps. Raises ValueError on a non-IP.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return "cloud metadata"
    if allow_private:
        return None
    for kind, flag in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("unspecified", ip.is_unspecified),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        ("non-global", not ip.is_global),
    ):
        if flag:
            return kind
    return None


def check_addresses(host: str, addresses: list[str], *, allow_private: bool) -> str | None:
    """An error message if any resolved address of `host` is refused, else None.

    Every address must pass: a name that resolves to one public and one private address
    is refused, since the client may connect to either.
    """
    for address in addresses:
        kind = address_refusal(address, allow_private=allow_private)
        if kind == "cloud metadata":
            return f"refused cloud metadata address {address} for host {host} (never fetched)"
        if kind is not None:
            return f"refused private address {address} for host {host} ({PRIVATE_HINT})"
    return None


def ip_literal(host: str) -> str | None:
    """`host` as an IP string when it is an IP literal (brackets stripped), else None."""
    bare = host.strip("[]")
    try:
        return str(ipaddress.ip_address(bare.split("%", 1)[0]))
    except ValueError:
        return None


_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.I)


def legacy_ipv4(host: str) -> str | None:
    """The dotted-decimal form of a host written as a legacy IPv4 literal (octal such as
    0177.0.0.1, hex, a single number, fewer than four parts), which inet_aton, httpx and
    browsers read differently; None for a canonical address or a host name."""
    labels = host.rstrip(".").split(".")
    if not all(_NUMERIC_LABEL.match(label) for label in labels) or len(labels) > 4:
        return None
    try:
        canonical = socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return "a valid dotted-decimal address"  # numeric, but no address at all
    return None if canonical == host else canonical


def host_allowed(host: str, allowed_hosts: tuple[str, ...]) -> bool:
    """True if `host` matches the allow-list (empty = any). Entries match exactly,
    case-insensitively; an entry `*.example.com` or `.example.com` also matches subdomains."""
    if not allowed_hosts:
        return True
    host = host.lower().rstrip(".")
    for entry in allowed_hosts:
        entry = entry.lower().rstrip(".")
        if entry.startswith("*."):
            entry = entry[1:]
        if entry.startswith("."):
            if host == entry[1:] or host.endswith(entry):
                return True
        elif host == entry:
            return True
    return False


def effective_allowed_hosts(
    allowed_hosts: tuple[str, ...], github_raw_base: str
) -> tuple[str, ...]:
    """The allow-list with the GitHub raw host added when github.com is allowed, so that
    allowing github.com lets its blob/README rewrites through."""
    if not allowed_hosts or not any(host_allowed(h, allowed_hosts) for h in GITHUB_HOSTS):
        return allowed_hosts
    raw_host = urlsplit(github_raw_base).hostname or ""
    return (*allowed_hosts, raw_host)


@dataclass(frozen=True)
class Rewrite:
    """Where to fetch a listed URL: `url` (maybe rewritten), or `unsupported` with why."""

    url: str
    unsupported: str | None = None


def github_rewrite(url: str, raw_base: str = DEFAULT_GITHUB_RAW_BASE) -> Rewrite:
    """Map github.com page URLs to raw file URLs; other URLs come back unchanged.

    /o/r/blob/<ref>/<path> and /o/r/raw/<ref>/<path> → <raw_base>/o/r/<ref>/<path>;
    /o/r → <raw_base>/o/r/HEAD/README.md; /o/r/tree/<ref>[/<path>] → .../<ref>[/<path>]/README.md.
    A ref containing '/' cannot be told apart from a path; the first segment is the ref.
    Other github.com pages (issues, wikis, ...) come back with `unsupported` set.
    """
    parts = urlsplit(url)
    if (parts.hostname or "").lower() not in GITHUB_HOSTS:
        return Rewrite(url)
    base = raw_base.rstrip("/")
    segs = [s for s in parts.path.split("/") if s]
    if len(segs) == 2:
        repo = segs[1].removesuffix(".git")
        return Rewrite(f"{base}/{segs[0]}/{repo}/HEAD/README.md")
    if len(segs) >= 5 and segs[2] in ("blob", "raw"):
        return Rewrite(f"{base}/{'/'.join(segs[:2])}/{'/'.join(segs[3:])}")
    if len(segs) >= 4 and segs[2] == "tree":
        return Rewrite(f"{base}/{'/'.join(segs[:2])}/{'/'.join(segs[3:])}/README.md")
    return Rewrite(
        url,
        unsupported=(
            f"GitHub page {parts.path or '/'} is not supported: list a file "
            "(github.com/<owner>/<repo>/blob/<ref>/<path>), a folder (/tree/<ref>/<path>) "
            "or a repository (github.com/<owner>/<repo>) for its README"
        ),
    )


def format_size(n: int) -> str:
    """Human size for messages: 10485760 → '10 MB', 2048 → '2 KB', 100 → '100 bytes'."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def redact(url: str, extra: tuple[str, ...] = ()) -> str:
    """`url` without user:password or the values of secret-looking query parameters (and
    of those named in `extra`), for log lines and reasons."""
    return clean_url(url, extra)
