"""Starts a throw-away PostgreSQL server from its binaries, for the tests of both backends."""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

# initdb and postgres refuse to run as root; when the tests do, the server runs as this user.
SERVER_USER = "nobody"
# Durability is worthless for a server that lives as long as one test session.
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "log_min_messages": "warning",
}


class ServerUnavailable(Exception):
    """There are no PostgreSQL server binaries on this machine."""


def find_binaries() -> Path:
    """The directory that holds initdb and pg_ctl: $PG_BIN, the PATH, or a distribution's folder."""
    candidates: list[str] = []
    if os.environ.get("PG_BIN"):
        candidates.append(os.environ["PG_BIN"])
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent))
    # Debian and Ubuntu keep the server binaries off the PATH; newest version first.
    candidates.extend(sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                             key=lambda path: _version(Path(path).parent.name), reverse=True))
    candidates.extend(sorted(glob.glob("/usr/pgsql-*/bin"), reverse=True))
    candidates.append("/usr/local/pgsql/bin")
    for folder in candidates:
        if all((Path(folder) / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    raise ServerUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH, in $PG_BIN or "
        "under /usr/lib/postgresql/*/bin; install them (apt-get install postgresql)")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """One server in a temporary directory, reachable on 127.0.0.1 as the superuser `postgres`."""

    binaries: Path
    base: Path
    port: int = 0
    _names: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.port}/{database}"

    def _conninfo(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        uid = gid = None
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            uid, gid = entry.pw_uid, entry.pw_gid
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        return subprocess.run([str(self.binaries / args[0]), *args[1:]], env=env, cwd=self.base,
                              capture_output=True, text=True, check=False, timeout=120,
                              user=uid, group=gid, extra_groups=None if uid is None else [])

    def start(self) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        done = self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        for _attempt in range(3):  # another process may take the free port before the server
            self.port = _free_port()
            options = " ".join([f"-p {self.port}", f"-k {self.base}",
                                *(f"-c {key}={value}" for key, value in SERVER_SETTINGS.items())])
            done = self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
                             "-l", str(self.log), "-o", options)
            if done.returncode == 0:
                return
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        raise RuntimeError(f"the PostgreSQL server did not start: {done.stderr}\n{log[-2000:]}")

    def restart(self) -> None:
        """Stop the server (its sessions end, as in a real restart) and start it again on the
        same port and settings."""
        done = self._run("pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D",
                         str(self.data), "-l", str(self.log))
        if done.returncode != 0:
            raise RuntimeError(f"the PostgreSQL server did not restart: {done.stderr}")

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))
        finally:
            self._remove_files()

    def _remove_files(self) -> None:
        """Remove the server's folder. A session's server holds a copy of the template for each
        test database, hundreds of thousands of files that took 15-40 s to unlink at the end of
        the suite: a detached `rm` removes them while the next step runs. The folder is renamed
        first, so that it is gone from `base` when `stop` returns, as it was with rmtree."""
        doomed = self.base.with_name(self.base.name + "-removed")
        try:
            self.base.rename(doomed)
            subprocess.Popen(["rm", "-rf", "--", str(doomed)], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        except OSError:  # no rm, or the folder could not be renamed: remove it here
            shutil.rmtree(doomed if doomed.exists() else self.base, ignore_errors=True)

    def create_database(self, prefix: str = "test", *, owner: str | None = None,
                        template: str = "template0") -> str:
        """A new database, a copy of `template` (by default empty), owned by `owner` (a new role
        without privileges) if given; returns its SQLAlchemy URL, connecting as the owner."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self._conninfo(), autocommit=True) as connection:
            if owner is not None:
                with contextlib.suppress(psycopg.errors.DuplicateObject):
                    connection.execute(sql.SQL("CREATE ROLE {} LOGIN")
                                       .format(sql.Identifier(owner)))
            # PostgreSQL 15 copies a template through the WAL unless told to copy its files,
            # which is much faster for a template this small.
            strategy = " STRATEGY file_copy" if connection.info.server_version >= 150000 else ""
            connection.execute(
                sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE {}" + strategy)
                .format(sql.Identifier(name), sql.Identifier(owner or "postgres"),
                        sql.Identifier(template)))
        return self.url(name, owner or "postgres")


def start_server() -> PostgresServer:
    """Start a server as an unprivileged user in a new temporary directory."""
    binaries = find_binaries()
    # Not under pytest's tmp_path: that lives in a 0700 folder the server user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="skillindex-pg-"))
    server = PostgresServer(binaries, base)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
