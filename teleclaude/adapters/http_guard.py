"""Who may talk to teleclaude's HTTP servers (`mcp --http`, `board --web`): loopback names, a bearer token,
and a remote address only when asked for; and whether the address can be listened on. Apart from fastmcp
and Textual, so that a refused `--host` or `--port` is said at once."""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from teleclaude.adapters.token import read_or_create, token_path
from teleclaude.errors import Error, ErrorCode, guard

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HttpAccess:
    """Who may talk to the HTTP server: Host names beyond loopback, and the bearer token (None: off)."""

    token: str | None
    allowed_hosts: tuple[str, ...] = ()


def http_access(
    host: str,
    *,
    allow_remote: bool = False,
    no_token: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    token_file: Path | None = None,
) -> HttpAccess | Error:
    """The guard for serving on `host`, or why that is refused: a non-loopback address needs both
    `allow_remote` and the token, since whoever reaches the server can start agents that run commands."""
    if not is_loopback(host) and not allow_remote:
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"{host} is not a loopback address: anyone who reaches it could start agents as you.\n"
            "Serve on 127.0.0.1, or add --allow-remote (the bearer token stays required).",
        )
    if no_token and not is_loopback(host):
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"--no-token is for loopback addresses only, not {host}.\nDrop --no-token.",
        )
    if no_token:
        return HttpAccess(None, allowed_hosts)

    token = guard(read_or_create)(token_file or token_path())
    return token if isinstance(token, Error) else HttpAccess(token, allowed_hosts)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def same_origin(origin: str | None, host_header: str) -> bool:
    """A browser's `Origin` is the server's own: the scheme, name and port of the `Host` it asked (a page
    on another port of this machine is another site). No Origin: not a browser's cross-site request."""
    if origin is None:
        return True
    try:
        asked, given = urlsplit(f"//{host_header}"), urlsplit(origin)
        ports = (asked.port, given.port)
    except ValueError:
        return False
    if given.scheme not in DEFAULT_PORTS or not given.hostname or "@" in given.netloc:
        return False
    if given.path or given.query or given.fragment:  # an Origin is scheme://name[:port], nothing more
        return False
    default = DEFAULT_PORTS[given.scheme]
    return (given.hostname, ports[1] or default) == ((asked.hostname or "").lower(), ports[0] or default)


def can_listen(host: str, port: int) -> Error | None:
    """Why the HTTP server could not listen on `host`:`port`, or None when it can. Checked by binding a
    socket (with SO_REUSEADDR, as uvicorn does) before the CLI says it serves there: uvicorn itself would
    say so only after that line, and exit 3."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return Error(
                ErrorCode.PORT_IN_USE,
                f"another program listens on {host}:{port}.\n"
                f"Pick another --port (e.g. --port {port % 65535 + 1}), or stop that program.",
            )
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"cannot listen on {host}:{port}: {error.strerror or error}.\n"
            "Give a --host address of this machine and a --port you may use (1024 and above).",
        )
    return None
