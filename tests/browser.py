"""Opens a page in headless Chromium (Debian's `chromium`) and reports what a person would see:
the text of elements, the console's messages and errors, a screenshot.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: messages of
JSON ending in NUL on file descriptors 3 and 4), so nothing is downloaded and no port opened.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe")
# What the console reports as a problem: console.error/assert, page errors, failed loads.
PROBLEMS = ("Runtime.exceptionThrown", "Runtime.consoleAPICalled", "Log.entryAdded")


def chromium() -> str | None:
    """The Chromium binary on this machine, if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with a fresh profile, and one page in it."""

    def __init__(self, binary: str, *, timeout: float = 60) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="skillindex-chromium-")
        browser_reads, self._send_fd = os.pipe()
        self._from, browser_writes = os.pipe()

        def descriptors() -> None:  # in the child: the pipe ends on 3 and 4, inheritable
            read, write = os.dup(browser_reads), os.dup(browser_writes)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=descriptors, close_fds=False, stdin=subprocess.DEVNULL,  # noqa: PLW1509
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(browser_reads)
        os.close(browser_writes)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=self.session)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._send_fd, self._from):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        found: dict[str, Any] = json.loads(message)
        return found

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None = None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._receive()
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def open(self, path: Path) -> None:
        """Load a file and wait for its load event."""
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=self.session)
        while not any(event.get("method") == "Page.loadEventFired" for event in self.events):
            self.events.append(self._receive())

    def evaluate(self, expression: str) -> Any:
        found = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                          session=self.session)
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def problems(self) -> list[dict[str, Any]]:
        """Console errors and warnings, exceptions, and entries the browser logged (a refused
        or failed load among them)."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") not in (
                    "error", "warning", "assert"):
                continue
            if method in PROBLEMS:
                found.append(event)
        return found

    def screenshot(self, path: Path) -> bytes:
        """The whole page as PNG, written to `path`."""
        shot = self.call("Page.captureScreenshot",
                         {"format": "png", "captureBeyondViewport": True}, session=self.session)
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return data
