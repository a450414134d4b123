"""`sessiontree serve`: a real server in a subprocess, fetched over HTTP, its app driven through
the websocket a browser uses, and (when Chromium is installed) the page loaded headless."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from helpers import U
from sessiontree import JsonlStorage, Session

CHROMIUM = "/usr/bin/chromium"
NAME = "served-session-name"
ESCAPES = re.compile(r"\x1b(\[[0-9;?$]*[a-zA-Z]|\][^\x07]*\x07)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "served.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("what the page shows"))
        s.append_session_name(NAME)
    return path


@contextlib.contextmanager
def serving(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontree", "serve", *args, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out, err = proc.communicate(timeout=5)
                    pytest.fail(f"the server did not come up: {err or out}")
                time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def screen_text(
    url: str, wanted: str, seconds: float = 30, *, typed: tuple[str, str] | None = None
) -> str:
    """Connect as the page's script does and collect what the app draws until `wanted` shows.
    `typed`: (ready, keys): once `ready` shows, type `keys` as the page sends them, and collect
    only what is drawn after."""
    seen = ""
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{url}ws?width=120&height=40") as ws:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and wanted not in seen:
            try:
                msg = await asyncio.wait_for(ws.receive(), 1)
            except TimeoutError:
                continue
            if msg.type == aiohttp.WSMsgType.BINARY:
                seen += ESCAPES.sub("", msg.data.decode("utf-8", "replace"))
                if typed is not None and typed[0] in seen:
                    await asyncio.sleep(0.5)
                    await ws.send_json(["stdin", typed[1]])
                    seen, typed = "", None
            elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                break
    return seen


def test_a_served_session_opens_no_other(session_file):
    """`o` on the page listed every session file beside the one served (and Pi's sessions
    beside the demo), and opened them, for writing, to whoever reached the page (QA)."""
    with Session(JsonlStorage.create(session_file.parent / "other-secret.jsonl", cwd="/p")) as s:
        s.append_message(U("not for the page"))
    with serving(str(session_file)) as (url, _proc):
        after = " ".join(asyncio.run(screen_text(url, "no other", typed=(NAME, "o"))).split())
    assert "This page shows one session: it opens no other" in after
    assert "other-secret" not in after and "Sessions in" not in after


def test_serve_loads_the_page_and_the_session(session_file):
    with serving(str(session_file)) as (url, proc):
        with urllib.request.urlopen(url, timeout=10) as page:
            html = page.read().decode()
            assert page.status == 200
        assert "textual.js" in html and f"ws://{url.split('//')[1]}ws" in html
        assert "sessiontree" in html  # the page's title, not the command line
        assert "googleapis" not in html  # no font fetched from Google's servers
        text = asyncio.run(screen_text(url, NAME))
        assert NAME in text and "what the page shows" in text
        assert proc.poll() is None


async def browse_headless(
    url: str, profile: Path, shot: Path, seconds: float = 45, requested: list[str] | None = None
) -> str:
    """Load `url` in headless Chromium, driven over the DevTools protocol, until the page says
    the app's first bytes arrived; save a screenshot; return the page's body classes. The URLs
    the page requested are added to `requested`."""
    browser = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--window-size=1280,800",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert browser.stderr is not None
        devtools = ""
        while not devtools:
            line = browser.stderr.readline()
            if not line:
                pytest.fail("Chromium exited before opening its DevTools port")
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            devtools = found.group(1) if found else ""
        http_base = "http://" + devtools.split("/")[2]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{http_base}/json/list") as listing:
                page = next(t for t in await listing.json() if t["type"] == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as cdp:
                counter = iter(range(1, 1_000_000))

                async def call(method: str, **params: object) -> dict:
                    ident = next(counter)
                    await cdp.send_json({"id": ident, "method": method, "params": params})
                    while True:
                        reply = await cdp.receive_json()
                        if reply.get("method") == "Network.requestWillBeSent" and requested is not None:
                            requested.append(reply["params"]["request"]["url"])
                        if reply.get("id") == ident:
                            return reply.get("result", {})

                await call("Page.enable")
                await call("Network.enable")
                await call("Page.navigate", url=url)
                classes = ""
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline and "-first-byte" not in classes:
                    await asyncio.sleep(0.5)
                    result = await call("Runtime.evaluate", expression="document.body.className")
                    classes = result.get("result", {}).get("value", "")
                await asyncio.sleep(1.5)  # let the first frames paint for the screenshot
                image = await call("Page.captureScreenshot", format="png")
                shot.write_bytes(base64.b64decode(image.get("data", "")))
                return classes
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"no headless browser ({CHROMIUM}; apt-get install chromium)"
)
def test_the_page_runs_the_app_in_headless_chromium(session_file, tmp_path):
    requested: list[str] = []
    with serving(str(session_file), "--read-only") as (url, _proc):
        shot = tmp_path / "served.png"
        classes = asyncio.run(browse_headless(url, tmp_path / "profile", shot, requested=requested))
    # the page connected its websocket and received the app's first output
    assert "-first-byte" in classes, classes
    # and asked nothing of any other server (textual-serve's page links a font from Google's)
    assert requested and all(r.startswith(url) or r.startswith("data:") for r in requested), requested
    assert shot.stat().st_size > 10_000  # a drawn screen, not a blank page


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"no headless browser ({CHROMIUM}; apt-get install chromium)"
)
def test_the_page_browsed_by_the_other_loopback_name_runs_the_app(session_file, tmp_path):
    """Browsed as http://localhost:PORT while the banner said 127.0.0.1, the page showed only
    "Session ended": it links its websocket by the banner's address, and the server refused a
    page of localhost connecting to 127.0.0.1 (QA)."""
    with serving(str(session_file), "--read-only") as (url, proc):
        assert url.startswith("http://127.0.0.1:")
        other = url.replace("127.0.0.1", "localhost")
        classes = asyncio.run(browse_headless(other, tmp_path / "profile", tmp_path / "shot.png"))
        proc.terminate()
        _out, err = proc.communicate(timeout=10)
    assert "-first-byte" in classes, classes
    assert "refused" not in err, err


def test_a_host_other_than_loopback_is_warned_about(session_file):
    """`--host localhost` was warned about like `--host 0.0.0.0`, though it is the default's
    reach; `--host 999.1.1.1` was warned about and then refused."""
    with serving(str(session_file), "--host", "localhost") as (_url, proc):
        proc.terminate()
        _out, err = proc.communicate(timeout=10)
    assert "warning" not in err
    with serving(str(session_file), "--host", "0.0.0.0") as (_url, proc):
        proc.terminate()
        _out, err = proc.communicate(timeout=10)
    assert "warning" in err and "no authentication" in err
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "serve", str(session_file), "--host", "999.1.1.1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("sessiontree: cannot serve on 999.1.1.1")
    assert "warning" not in done.stderr


async def handshake(url: str, **headers: str) -> int:
    """The status of a websocket handshake with these headers (101: connected)."""
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(f"{url}ws?width=80&height=24", headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_a_page_of_another_site_cannot_connect(session_file):
    """Any page open in the user's browser could open the app's websocket (browsers let a page
    connect to any websocket, 127.0.0.1 included), read the session and type keys that wrote a
    move (QA); or rebind its own domain name to 127.0.0.1. The server's own page still can."""
    with serving(str(session_file)) as (url, proc):
        here = url.rstrip("/")
        port = here.rsplit(":", 1)[1]
        assert asyncio.run(handshake(url, Origin="http://evil.example.com")) == 403
        assert asyncio.run(handshake(url, Origin="null")) == 403
        assert asyncio.run(handshake(url, Origin=f"http://127.0.0.1:{int(port) + 1}")) == 403
        rebound = f"evil.example.com:{port}"
        assert asyncio.run(handshake(url, Origin=f"http://{rebound}", Host=rebound)) == 403
        assert asyncio.run(handshake(url, Origin=here)) == 101
        assert asyncio.run(handshake(url, Origin=f"http://localhost:{port}", Host=f"localhost:{port}")) == 101
        # the page browsed by the other loopback name links the banner's address (QA)
        assert asyncio.run(handshake(url, Origin=f"http://localhost:{port}")) == 101
        assert asyncio.run(handshake(url, Origin=f"http://localhost:{int(port) + 1}")) == 403
        proc.terminate()
        _out, err = proc.communicate(timeout=10)
    refused = [line for line in err.splitlines() if line.startswith("sessiontree: refused GET /ws")]
    assert len(refused) == 5 and "'http://evil.example.com'" in refused[0], err
    assert "is not a name this server goes by" in refused[3]
    assert session_file.read_text().count('"type":"leaf"') == 0


def test_an_ipv6_address_is_linked_in_brackets(session_file):
    """`--host ::1` printed http://::1:PORT and linked the page's script there: it stayed on
    its splash screen."""
    with socket.socket(socket.AF_INET6) as probe:
        try:
            probe.bind(("::1", 0))
        except OSError:
            pytest.skip("this machine has no IPv6 loopback")
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sessiontree",
            "serve",
            str(session_file),
            "--host",
            "::1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://[::1]:{port}/"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as page:
                    html = page.read().decode()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
                time.sleep(0.2)
        assert f"{url}static/js/textual.js" in html and f"ws://[::1]:{port}/ws" in html
        text = asyncio.run(screen_text(url, NAME))
        assert NAME in text
    finally:
        proc.terminate()
        out, _err = proc.communicate(timeout=10)
    assert f"at {url.rstrip('/')} (Ctrl+C stops)" in out


def test_serve_refuses_a_bad_address_before_listening(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessiontree",
            "serve",
            str(tmp_path / "missing.jsonl"),
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "no such session file" in done.stderr


def test_serve_needs_the_port_free(session_file):
    with serving(str(session_file)) as (url, _proc):
        port = url.rsplit(":", 1)[1].strip("/")
        done = subprocess.run(
            [sys.executable, "-m", "sessiontree", "serve", str(session_file), "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr and "cannot serve" in done.stderr
    assert done.stdout == ""  # no banner saying it serves, nor "Press Ctrl+C to quit"


def test_every_address_links_the_page_by_the_machines_name(session_file):
    """`--host 0.0.0.0` gave a page whose script, styles and websocket were at
    `http://0.0.0.0:PORT/`, which no browser loads: it stayed on its splash."""
    with serving(str(session_file), "--host", "0.0.0.0") as (url, proc):
        with urllib.request.urlopen(url, timeout=10) as page:
            html = page.read().decode()
        proc.terminate()
        _out, err = proc.communicate(timeout=10)
    port = url.rstrip("/").rsplit(":", 1)[1]
    assert "0.0.0.0" not in html
    assert f"http://{socket.gethostname()}:{port}/static/js/textual.js" in html
    assert f"ws://{socket.gethostname()}:{port}/ws" in html
    assert "give --public-url if browsers reach it by another name" in err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("notaurl", "is not an http:// or https:// URL with a host"),
        ("ftp://host", "is not an http:// or https:// URL with a host"),
        ("http://host:99999", "is not a URL (Port out of range"),
        ("http://host/?a=1", "a public URL has no ?query or #fragment"),
    ],
)
def test_a_public_url_browsers_cannot_use_is_refused(session_file, url, said):
    """ "notaurl" was taken, then every page answered with an error 500 (textual-serve built
    the websocket's URL from it), and "ftp://" was linked as is (QA)."""
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "serve", str(session_file), "--public-url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and said in done.stderr and done.stdout == ""


def test_a_public_url_links_the_page(session_file):
    with serving(str(session_file), "--public-url", "https://sessions.example.org/tree/") as (url, proc):
        with urllib.request.urlopen(url, timeout=10) as page:
            html = page.read().decode()
        proc.terminate()
        proc.communicate(timeout=10)
    assert "https://sessions.example.org/tree/static/js/textual.js" in html
    assert "wss://sessions.example.org/tree/ws" in html


def test_the_banner_says_what_is_served_and_where(session_file):
    """textual-serve's named the command each tab runs: this interpreter's path."""
    with serving(str(session_file)) as (url, proc), urllib.request.urlopen(url, timeout=10) as page:
        page.read()
    out = proc.stdout.read() if proc.stdout else ""
    # the banner alone: aiohttp's access log added a line per request (sizes of -1)
    assert out.splitlines() == [f"sessiontree: serving {session_file} at {url.rstrip('/')} (Ctrl+C stops)"]
    assert "--child" not in out and sys.executable not in out


def test_the_child_is_only_started_by_serve():
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "serve", "--child"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "SESSIONTREE_SERVE_ARGS"},
    )
    assert done.returncode == 2 and "started by `sessiontree serve`" in done.stderr


def test_serve_a_postgres_session_without_its_password_on_the_command_line(pg_database):
    from sessiontree import PostgresStorage

    with Session(PostgresStorage.create(pg_database, cwd="/p", session_id="served")) as s:
        s.append_message(U("stored in postgres"))
        s.append_session_name(NAME)
    password = pg_database.split(":")[2].split("@")[0]
    with serving(f"{pg_database}#served") as (url, proc):
        text = asyncio.run(screen_text(url, "stored in postgres"))
        assert NAME in text and "stored in postgres" in text
        assert password not in text
        listing = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
        children = [line for line in listing.splitlines() if "serve --child" in line]
        assert children and not any(password in line for line in children)
        assert proc.poll() is None
    # nor in what it printed: the banner named the URL with its password (QA)
    said = (proc.stdout.read() if proc.stdout else "") + (proc.stderr.read() if proc.stderr else "")
    assert "sessiontree: serving postgresql://" in said and ":***@" in said and password not in said


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_server_and_its_tabs_with_a_tab_open(session_file, signum):
    """Signalled alone (a service manager, `kill`), with a tab open, the server took 15-20 s
    to stop, as aiohttp waited for the tab's websocket to end on its own; and it said 0."""

    async def tab_open_while_signalled(url: str, proc: subprocess.Popen[str]) -> float:
        async with aiohttp.ClientSession() as http, http.ws_connect(f"{url}ws?width=80&height=24") as ws:
            deadline = time.monotonic() + 30
            while not children(proc.pid) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            tabs = children(proc.pid)
            assert tabs, "no app process started for the tab"
            await asyncio.sleep(1)
            start = time.monotonic()
            proc.send_signal(signum)
            while proc.poll() is None and time.monotonic() - start < 30:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ws.receive(), 0.2)
            took = time.monotonic() - start
            for _ in range(50):
                if not any(alive(pid) for pid in tabs):
                    break
                await asyncio.sleep(0.1)
            assert not any(alive(pid) for pid in tabs)
            return took

    with serving(str(session_file)) as (url, proc):
        took = asyncio.run(tab_open_while_signalled(url, proc))
        assert proc.wait(timeout=5) == 128 + signum
    assert took < 10, took
