"""The command reference of the manual (docs/commands.md), written from the command tree itself.

`python -m skillindex.cli.reference docs/commands.md` rewrites the page; a test checks that the
page in the repository is what this module writes, so no command or option goes undocumented.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from skillindex.cli.common import cli

WIDTH = 100  # the help text is wrapped as on a terminal this wide, whatever runs the generator

_PREAMBLE = """\
# Command reference

Every command and option of `skillindex`, as its `--help` prints it. This page is written by
`python -m skillindex.cli.reference docs/commands.md`; a test checks that it is current.
Exit codes: 0 ok, 1 error (or drift found), 2 usage or settings error, 3 not found, 4 refused.
Global options (`--config`, `--db`, `--cwd`, `--index`, `--json`, `--debug`) go before the
command; `--json` is also accepted after it.
"""


def _walk(command: click.Command, path: tuple[str, ...],
          parent: click.Context | None) -> Iterator[tuple[tuple[str, ...], str]]:
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(command, info_name=path[-1], parent=parent, **settings)
    yield path, command.get_help(ctx)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, (*path, name), ctx)


def _anchor(path: tuple[str, ...]) -> str:
    return "-".join(path)


def reference() -> str:
    """The whole page: a contents list, then each command's help in a code block."""
    entries = list(_walk(cli, ("skillindex",), None))
    lines = [_PREAMBLE, "## Contents", ""]
    for path, _ in entries:
        title = " ".join(path)
        lines.append(f"- [`{title}`](#{_anchor(path)})")
    for path, text in entries:
        title = " ".join(path)
        lines += ["", f"## {title}", "", "```text", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # the documented way to rewrite the page
    from skillindex import fsio

    fsio.write(sys.argv[1] if len(sys.argv) > 1 else "docs/commands.md", reference(),
               what="the command reference", named=len(sys.argv) > 1, within=Path.cwd(),
               private=False)
