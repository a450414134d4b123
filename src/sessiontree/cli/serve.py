"""`sessiontree serve [PATH|URL]`: the browser as a web page, with textual-serve.

textual-serve starts one app process per browser tab (a second tab of a session being moved in
the first opens it read-only, as a second terminal would). It runs a shell command for each, so
the address is handed over in the environment rather than on the command line, where other users
of the machine could read a database password in the process list.

It listens on 127.0.0.1 unless told otherwise: the page has no login, and whoever reaches it
reads the session and can move its leaf, so a --host other than a loopback address is warned
about. Being on loopback is not enough on its own: any web page the user has open may connect to
a local websocket (browsers do not apply the same-origin policy to websockets) or rebind its own
domain name to 127.0.0.1, so requests whose Origin is another site, or whose Host is a name this
server does not go by, are refused (`_refusal`).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import re
import shlex
import signal
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from ..model.errors import SessionError
from ..opening import open_session, parse_address
from .browse import SUMMARIZER_ENV
from .output import err

COMMANDS = ("serve",)
CHILD_ENV = "SESSIONTREE_SERVE_ARGS"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
PAGE = "app_index.html"  # textual-serve's template of the page
TAB_STOP_SECONDS = 5  # at shutdown, how long the tabs' apps are given to exit


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the browser as a web page (on 127.0.0.1 unless --host)")
    p.add_argument("path", nargs="?", help="a session file, db.sqlite#id, postgresql://…#id, or a directory")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument(
        "--host",
        help=f"address to listen on (default {DEFAULT_HOST}); the page has no authentication",
    )
    p.add_argument(
        "--public-url",
        type=_public_url,
        help="the http(s):// URL browsers reach the server by, behind a proxy",
    )
    p.add_argument("--read-only", action="store_true", help="never write to the session")
    p.add_argument("--no-follow", action="store_true", help="do not watch the session for new entries")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one browser tab's app
    p.set_defaults(func=cmd_serve)


def _public_url(text: str) -> str:
    """An argparse `type`: an http or https URL with a host. The page's script, styles and
    websocket are linked from it; textual-serve answered every request with an error 500 for
    "notaurl" and linked an "ftp://" one (QA)."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(f"{text!r}: a public URL has no ?query or #fragment")
    return text.strip().rstrip("/")


WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # every address of the machine: no name a browser can use


def cmd_serve(args: argparse.Namespace) -> int:
    if args.child:
        return _child()
    try:
        from textual_serve.server import Server
    except ImportError:
        raise SessionError(
            "invalid_argument", "serving needs textual-serve: pip install 'sessiontree[serve]'"
        ) from None
    if not 0 < args.port < 65536:
        raise SessionError("invalid_argument", f"--port {args.port} is not a TCP port")
    if args.path is not None:
        _check_address(args.path)
    host = DEFAULT_HOST if args.host is None else args.host
    try:
        _check_port(host, args.port)  # before any warning about an address that cannot serve
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        raise _cannot_serve(host, args.port, exc) from None
    if not _loopback(host):
        err(
            f"sessiontree: warning: serving on {host}:{args.port} with no authentication: anyone who can"
            " reach it can read the session"
            + ("" if args.read_only else " and move its leaf (see --read-only)")
        )
    os.environ[CHILD_ENV] = json.dumps(
        {"path": args.path, "read_only": args.read_only, "follow": not args.no_follow}
    )
    command = shlex.join([sys.executable, "-m", "sessiontree", "serve", "--child"])
    public_url = args.public_url
    if public_url is None and ":" in host:  # an IPv6 address: "http://::1:8000" is no URL
        public_url = f"http://[{host}]:{args.port}"
    if public_url is None and host in WILDCARD_HOSTS:
        # The page links its script, styles and websocket by absolute URLs made of the host:
        # "http://0.0.0.0:PORT/…" loads in no browser. This machine's name is the likeliest to
        # reach it; --public-url says otherwise.
        public_url = f"http://{socket.gethostname()}:{args.port}"
        err(
            f"sessiontree: note: the page links {public_url}; give --public-url if browsers"
            " reach it by another name"
        )
    server = _local_page(Server)(
        command, host=host, port=args.port, title="sessiontree", public_url=public_url
    )
    # the banner never shows a password (the URL's own, or `?password=`)
    what = "the bundled demo" if args.path is None else parse_address(args.path).display()

    stopped_by: list[int] = []

    def stop(signum: int) -> None:
        stopped_by.append(signum)
        server.request_exit()

    async def started(_app: object) -> None:
        # In place of textual-serve's banner, which names the command each tab runs (this
        # interpreter's path) and comes before the port is taken: "Press Ctrl+C to quit",
        # then "cannot serve" when it is in use.
        print(f"sessiontree: serving {what} at {server.public_url} (Ctrl+C stops)", flush=True)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):  # textual-serve's, noting which came
            loop.add_signal_handler(signum, stop, signum)

    server.on_startup = started
    try:
        server.serve()
    except OSError as exc:  # taken between the check and the start
        raise _cannot_serve(host, args.port, exc) from None
    # stopped by a signal: 128 + its number, as a shell reports a command it interrupted
    return 128 + stopped_by[0] if stopped_by else 0


def _cannot_serve(host: str, port: int, exc: OSError) -> SessionError:
    return SessionError("invalid_argument", f"cannot serve on {host}:{port}: {exc.strerror or exc}")


def _loopback(host: str) -> bool:
    """`host` names this machine to itself alone (127.0.0.1, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refusal(origin: str | None, host: str | None, public_url: str) -> str:
    """Why a request with these Origin and Host headers is refused ("" when it is not).
    Host must be an address or a name this server goes by (localhost, this machine's name,
    --public-url's), so a page that rebinds its own domain to this machine is turned away;
    Origin, which a browser sends with every websocket, must be this server's own page. A
    request without an Origin comes from a program, not from a page another site can drive."""
    public = urlsplit(public_url)
    name = urlsplit(f"//{host}").hostname if host else None
    names = {"localhost", socket.gethostname().lower(), (public.hostname or "").lower()}
    if not host or name is None:
        return "a request without a Host"
    if name.lower() not in names:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return f"Host {host!r} is not a name this server goes by (see --public-url)"
    if origin is None:
        return ""
    site = urlsplit(origin)
    if site.scheme not in ("http", "https"):
        return f"a page of {origin!r} asked to connect: only this server's own page may"
    if site.netloc.lower() in (host.lower(), public.netloc.lower()):
        return ""
    # The page links its websocket by the banner's address: browsed as http://localhost:PORT
    # it connected to 127.0.0.1 from a page of localhost, and was refused (QA). Two loopback
    # names of the same port are this machine's same server.
    asked = urlsplit(f"//{host}")
    if _loopback(site.hostname or "") and _loopback(name) and site.port == asked.port:
        return ""
    return f"a page of {origin!r} asked to connect: only this server's own page may"


def _guard(public_url: str) -> Any:
    """An aiohttp middleware refusing, with 403 and a line on stderr, what `_refusal` refuses."""
    from aiohttp import web

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> Any:
        why = _refusal(request.headers.get("Origin"), request.headers.get("Host"), public_url)
        if why:
            err(f"sessiontree: refused {request.method} {request.path}: {why}")
            raise web.HTTPForbidden(text=f"sessiontree: refused: {why}\n")
        return await handler(request)

    return guard


# textual-serve's page links a font from Google's servers: every visit told Google, and with no
# network the page waited for it. The page's own fallbacks (menlo, monospace) are used instead.
_REMOTE_FONT = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>", re.IGNORECASE)


def _local_page(server_class: type[Any]) -> type[Any]:
    """textual-serve's `Server` serving its page without the remote font link."""
    import aiohttp_jinja2
    import jinja2

    class LocalPageServer(server_class):
        # the tabs' websocket handlers, cancelled at shutdown: aiohttp otherwise waits for each
        # to end on its own, 15-20 s with a tab open when only this process was signalled
        tabs: set[asyncio.Task[Any]] = set()

        async def handle_websocket(self, request: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None
            self.tabs.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                self.tabs.discard(task)

        async def on_shutdown(self, app: Any) -> None:
            tabs = list(self.tabs)
            for task in tabs:
                task.cancel()
            if tabs:  # each stops its app and waits for it: before the loop closes, which
                # otherwise warned "Loop … that handles pid … is closed" as the apps exited
                await asyncio.wait(tabs, timeout=TAB_STOP_SECONDS)
            await super().on_shutdown(app)

        def initialize_logging(self) -> None:
            super().initialize_logging()
            # aiohttp's access log went to stdout under the banner, a line per request with
            # the size of streamed answers as -1: the banner is what the terminal shows.
            logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

        async def _make_app(self) -> Any:
            app = await super()._make_app()
            env = aiohttp_jinja2.get_env(app)
            assert env.loader is not None  # set by textual-serve's own `_make_app`
            source = env.loader.get_source(env, PAGE)[0]
            env.loader = jinja2.DictLoader({PAGE: _REMOTE_FONT.sub("", source)})
            app.middlewares.append(_guard(self.public_url))
            return app

    return LocalPageServer


def _check_port(host: str, port: int) -> None:
    """Raise OSError now if `host:port` cannot be listened on (aiohttp says so only after the
    server's start-up has run)."""
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds
            probe.bind(address)


def _check_address(path: str) -> None:
    """Fail now, in the terminal, for an address that cannot open, rather than in every tab."""
    if os.path.isdir(path):
        return
    parse_address(path)
    with open_session(path, read_only=True, verify="later"):
        pass


def _child() -> int:
    from ..tui.launch import launch

    try:
        options = json.loads(os.environ[CHILD_ENV])
    except (KeyError, ValueError):
        raise SessionError("invalid_argument", "serve --child is started by `sessiontree serve`") from None
    return launch(
        options.get("path"),
        read_only=bool(options.get("read_only")),
        summarizer=os.environ.get(SUMMARIZER_ENV),
        follow=bool(options.get("follow", True)),
        pick=False,
        only=True,
    )
