"""`teleclaude board --web`: the same app in a browser (textual-serve), behind the checks of `mcp --http`.

Every request's Host must be a loopback name, the bound address or an `--allowed-host` (a page that rebinds
its DNS name to 127.0.0.1 gets 421), and a browser's Origin must be the board's own: the Host it asked, port
included (a page on another port of this machine gets 403; its browser would send the board's cookie).
With the token (the one `mcp --http` uses, `~/.teleclaude/http-token`) a browser opens `/?token=…` once and
gets it back as an HttpOnly, SameSite=Strict cookie for the page's own requests and its websocket; anything
else gets 401.
textual-serve starts `python -m teleclaude board` per browser tab, in the project's folder (no path is
put into its shell command).
"""

from __future__ import annotations

import hmac
import os
import re
import shlex
import sys
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server

from teleclaude.adapters.http_guard import HttpAccess, is_loopback, same_origin
from teleclaude.board.app import SERVER_PID

COOKIE = "teleclaude_board"
# the page loads its own scripts, styles, font and images and talks to its own websocket, nothing else: the
# board works offline and tells no one it is open (`OwnFont`)
POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_allowed(host_header: str, bound: str, allowed: tuple[str, ...]) -> bool:
    """The Host header (`name[:port]`) names this server: loopback, the bound address, or allowed."""
    name = urlsplit(f"//{host_header}").hostname or ""
    return name in LOOPBACK_NAMES or is_loopback(name) or name == bound.strip("[]").lower() or name in allowed


def guard_middleware(access: HttpAccess, bound: str):
    allowed = tuple(name.lower() for name in access.allowed_hosts)

    @web.middleware
    async def check(request: web.Request, handler):
        response = await admit(request, handler)
        if not isinstance(response, web.WebSocketResponse):
            response.headers["Content-Security-Policy"] = POLICY
        return response

    async def admit(request: web.Request, handler):
        host = request.headers.get("Host", "")
        if not host_allowed(host, bound, allowed):
            return web.Response(status=421, text="Misdirected request: this Host is not served here.\n")
        if not same_origin(request.headers.get("Origin"), host):  # not a page on another port either
            return web.Response(status=403, text="Forbidden: requests from another site are refused.\n")
        if access.token is None:
            return await handler(request)
        expected = access.token.encode()
        given = request.query.get("token")
        if given is not None and hmac.compare_digest(given.encode(), expected):
            response = await handler(request)
            response.set_cookie(COOKIE, access.token, httponly=True, samesite="Strict")
            return response
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), expected):
            return await handler(request)
        return web.Response(
            status=401, text="Unauthorized: open /?token=<the token in ~/.teleclaude/http-token>.\n"
        )

    return check


# textual-serve's page links a web font of Google's; the same font ships in its static folder
_LINK_OUTSIDE = re.compile(r"<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]*\"[^>]*>", re.IGNORECASE)
_SHIPPED_FONT = (
    '<style>@font-face { font-family: "Roboto Mono"; '
    'src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype"); }</style>'
)


class OwnFont(jinja2.FileSystemLoader):
    """textual-serve's page templates, each link to another site (its web font) replaced by the font it
    ships and serves from /static."""

    def get_source(self, environment: jinja2.Environment, template: str):
        source, path, uptodate = super().get_source(environment, template)
        return _LINK_OUTSIDE.sub(lambda _: _SHIPPED_FONT, source), path, uptodate


class BoardServer(Server):
    def __init__(self, root: Path, host: str, port: int, access: HttpAccess) -> None:
        shown = f"[{host}]" if ":" in host else host
        command = f"{shlex.quote(sys.executable)} -m teleclaude board"
        super().__init__(
            command, host=host, port=port, title="teleclaude board", public_url=f"http://{shown}:{port}"
        )
        self.root = root
        self.access = access

    async def _make_app(self) -> web.Application:
        made = await super()._make_app()
        aiohttp_jinja2.setup(made, loader=OwnFont(self.templates_path))
        made.middlewares.append(guard_middleware(self.access, self.host))
        return made

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: the CLI said where it serves and how to get in."""

    def initialize_logging(self) -> None:
        """The CLI's logging stays as it is (textual-serve would install its own handler)."""


def serve(root: Path, host: str, port: int, access: HttpAccess) -> None:
    os.chdir(root)  # the apps textual-serve starts read this project
    os.environ[SERVER_PID] = str(os.getpid())
    BoardServer(root, host, port, access).serve()
