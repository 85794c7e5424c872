"""The `skillindex` command: parses options, makes one library call, prints the result."""

from __future__ import annotations

from collections.abc import Sequence

# The command modules register their commands on the group when a command is looked up
# (`common.COMMAND_MODULES`): a one-shot command imports only its own.
from skillindex.cli.common import cli

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="skillindex")
