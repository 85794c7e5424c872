"""The one line of progress a long command draws on a terminal (reindex, verify)."""

from __future__ import annotations

import shutil
import time
from typing import TextIO

import click

from skillindex import text as escape


class Progress:
    """One line on stderr, redrawn at most ten times a second, never wider than the terminal.

    A line as wide as the terminal would wrap on some terminals and leave a row behind at each
    redraw, so it stops one column short; with a total it shows the rate and the time left.
    """

    def __init__(self, stream: TextIO | None = None, verb: str = "indexing",
                 noun: str = "skills") -> None:
        self.stream = stream
        self.verb = verb
        self.noun = noun
        self.started: float | None = None  # the first skill, not start-up, starts the clock
        self.last = 0.0
        self.width = 0

    def __call__(self, done: int, expected: int | None, root: str) -> None:
        now = time.monotonic()
        if self.started is None:
            self.started = now
        if now - self.last < 0.1:
            return
        self.last = now
        self._draw(self.line(done, expected, root, now - self.started))

    def line(self, done: int, expected: int | None, root: str, elapsed: float) -> str:
        columns = shutil.get_terminal_size((80, 24)).columns - 1
        rate = done / elapsed if elapsed > 0 else 0.0
        head = f"{self.verb} {done}"
        if expected and done <= expected:
            head += f"/{expected} {self.noun} ({done * 100 // expected}%)"
            if rate > 0:
                head += f", {rate:,.0f}/s, {_duration((expected - done) / rate)} left"
        else:
            head += f" {self.noun}" + (f", {rate:,.0f}/s" if rate > 0 else "")
        where = escape.terminal(root)
        room = columns - len(head) - 2
        if room >= 8:
            head += "  " + (where if len(where) <= room else "…" + where[-(room - 1):])
        return head[:max(columns, 1)]

    def _draw(self, line: str) -> None:
        pad = max(self.width - len(line), 0)
        click.echo("\r" + line + " " * pad, nl=False, err=True, file=self.stream)
        self.width = len(line)

    def clear(self) -> None:
        if self.width:
            click.echo("\r" + " " * self.width + "\r", nl=False, err=True, file=self.stream)
            self.width = 0


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"
