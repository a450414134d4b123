"""A throwaway PostgreSQL server for the tests, the benchmarks and CI.

    python tests/harness/pgcluster.py start DIR [--fast]   # prints export lines (URL, PGDIR)
    python tests/harness/pgcluster.py stop DIR

`initdb` makes a cluster in a private directory, `pg_ctl` starts it on a free loopback port
with its socket in the same directory, and a database is created for the tests. The superuser
has a random password and TCP logins must give it (so a wrong password is really refused);
logins over the socket are trusted, which only the directory's owner can reach.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
`postgres` system user (`runuser`), which then owns the directory. `--fast` turns fsync off:
the tests check behaviour, not durability, and fsync is most of a commit's cost on this disk.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

VERSIONS_DIR = Path("/usr/lib/postgresql")
SUPERUSER = "sessiontree"
DATABASE = "sessiontree_test"


def server_bin() -> Path | None:
    """The newest installed server's bin directory (SESSIONTREE_PG_BIN overrides), or None."""
    override = os.environ.get("SESSIONTREE_PG_BIN")
    candidates = [Path(override)] if override else []
    if VERSIONS_DIR.is_dir():
        versions = sorted(
            (p for p in VERSIONS_DIR.iterdir() if p.name.isdigit()), key=lambda p: int(p.name), reverse=True
        )
        candidates += [p / "bin" for p in versions]
    for candidate in candidates:
        if all((candidate / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@dataclass
class Cluster:
    root: Path
    port: int
    password: str
    bin: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return self.url_for(DATABASE)

    def url_for(self, database: str, password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{SUPERUSER}:{pw}@127.0.0.1:{self.port}/{database}"

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            _as_server_user([str(self.bin / argv[0]), *argv[1:]]),
            capture_output=True,
            text=True,
            check=check,
            cwd=self.root,
        )

    def stop(self) -> None:
        if self.data.exists():
            self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def start(root: Path | None = None, *, fast: bool = False) -> Cluster:
    """Create and start a cluster (in a new temporary directory unless `root` is given) and its
    test database. Raises RuntimeError, with the server's log, when it does not come up."""
    bindir = server_bin()
    if bindir is None:
        raise RuntimeError(f"no PostgreSQL server binaries under {VERSIONS_DIR} (install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="stpg-")) if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    password = secrets.token_hex(12)
    (root / "pw").write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(root / "pw", "postgres", "postgres")
    cluster = Cluster(root, 0, password, bindir)
    try:
        cluster.run(
            "initdb",
            "-D",
            str(cluster.data),
            "-U",
            SUPERUSER,
            f"--pwfile={root / 'pw'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-instructions",
        )
        options = f"-k {root} -c listen_addresses=127.0.0.1 -c max_connections=60"
        if fast:
            options += " -c fsync=off -c full_page_writes=off"
        for _attempt in range(5):  # the port may be taken between choosing and binding it
            cluster.port = _free_port()
            done = cluster.run(
                "pg_ctl",
                "-D",
                str(cluster.data),
                "-l",
                str(root / "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {cluster.port} {options}",
                "start",
                check=False,
            )
            if done.returncode == 0:
                break
            time.sleep(0.2)
        else:
            log = (root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr.strip()}\n{log}")
        cluster.run("createdb", "-h", str(root), "-p", str(cluster.port), "-U", SUPERUSER, DATABASE)
    except subprocess.CalledProcessError as exc:
        cluster.stop()
        raise RuntimeError(f"{' '.join(exc.cmd)} failed: {exc.stderr.strip()}") from None
    except BaseException:
        cluster.stop()
        raise
    (root / "port").write_text(str(cluster.port))
    return cluster


def attach(root: Path) -> Cluster:
    """The cluster a previous `start(root)` left running."""
    bindir = server_bin()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binaries")
    password = (root / "pw").read_text().strip()
    port = int((root / "port").read_text())
    return Cluster(root, port, password, bindir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--fast", action="store_true", help="fsync off (tests only)")
    args = parser.parse_args(argv)
    if args.action == "start":
        try:
            cluster = start(args.dir, fast=args.fast)
        except RuntimeError as exc:
            print(f"pgcluster: {exc}", file=sys.stderr)
            return 1
        print(f"export SESSIONTREE_TEST_PG_URL='{cluster.url}'")
        return 0
    with contextlib.suppress(FileNotFoundError):
        attach(args.dir).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
