"""The command tree as click declares it: every command and group under `skillindex`."""

from __future__ import annotations

from collections.abc import Iterator

import click

from skillindex.cli import cli


def _walk(command: click.Command, path: tuple[str, ...],
          ctx: click.Context) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, (*path, name), ctx)


def commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command and group under `skillindex` (loaded as a lookup loads them), the group
    itself first, each with its path of names."""
    with click.Context(cli) as ctx:
        return list(_walk(cli, (), ctx))
