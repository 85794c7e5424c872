"""The `skillindex` command: parses options, makes one library call, prints the result."""

from __future__ import annotations

from collections.abc import Sequence

# Importing the command modules registers their commands on the group.
from skillindex.cli import catalog, db, disclose, index, search, serve, trust, watch
from skillindex.cli.common import cli

__all__ = ["catalog", "cli", "db", "disclose", "index", "main", "search", "serve", "trust",
           "watch"]


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="skillindex")
