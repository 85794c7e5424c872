"""The `skillindex` command: parses options, makes one library call, prints the result."""

from __future__ import annotations

import logging
from collections.abc import Sequence

# The command modules register their commands on the group when a command is looked up
# (`common.COMMAND_MODULES`): a one-shot command imports only its own.
from skillindex.cli.common import cli

__all__ = ["cli", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    # The command reports a lost server in its own words: the driver's warnings about the
    # connection it had (psycopg logs "error ignored terminating <Pipeline>" as it closes)
    # would otherwise reach stderr raw, through logging's last-resort handler.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    cli.main(args=list(argv) if argv is not None else None, prog_name="skillindex")
