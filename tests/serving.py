"""`skillindex serve --http` as a process of its own, for the tests that drive it as hosts do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(cwd: Path, *options: str, log: Path | None = None,
            files: int | None = None) -> Iterator[int]:
    """`skillindex serve --http PORT [options]` started in `cwd` (its environment this one's),
    its port once it accepts a connection; stopped at the end. Its access log (stdout) goes
    to `log` when given; `files` is its limit of open file descriptors."""
    port = free_port()
    # The limit is set by the server's own first statement: nothing runs between fork and exec.
    start = ["-m", "skillindex"] if files is None else ["-c", (
        f"import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({files}, "
        f"{files})); sys.argv[0] = 'skillindex'; runpy.run_module('skillindex', "
        "run_name='__main__')")]
    with open(log or os.devnull, "wb") as access:
        server = subprocess.Popen([sys.executable, *start, "serve", "--http", str(port),
                                   *options], cwd=cwd, stdout=access, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:  # the server is up once it accepts a connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "the server did not listen within 120 s"
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode == 0, server.stderr.read() if server.stderr else ""
