"""The serve command: the index as an MCP server (skills extension, resources, tools)."""

from __future__ import annotations

import click

from skillindex.cli.common import cli, fail, options_of
from skillindex.errors import EXIT_ERROR

INSTALL_HINT = "skillindex serve needs the mcp extra: pip install 'skillindex[mcp]'"


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT`; the host defaults to 127.0.0.1 (this machine only)."""
    host, colon, port = value.rpartition(":")
    if not colon:
        host, port = "", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT", param_hint="--http")
    return host, int(port)


@cli.command()
@click.option("--http", "listen", metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST "
              "defaults to 127.0.0.1).")
@click.option("--page-size", type=click.IntRange(min=1), default=500, show_default=True,
              help="Skills per skills/list page (a skill is never split across pages).")
@click.option("--poll", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              metavar="SECONDS", help="How often to look for a committed reindex.")
@click.pass_context
def serve(ctx: click.Context, listen: str | None, page_size: int, poll: float) -> None:
    """Serve the skills of this directory over MCP (stdio unless --http).

    The winners that `skillindex list` shows are published through the MCP skills extension
    (skills/list, skills/get, resources/read, resources/directory/read) and the tools
    list_skills, load_skill and read_skill_file. Every read is verified against the index and
    audited under the client's name. A reindex is noticed without a restart.

    \b
    Examples:
      skillindex --cwd ~/project serve        # what a host's mcpServers entry runs
      skillindex serve --http 127.0.0.1:8765  # streamable HTTP at /mcp
    """
    address = parse_listen(listen) if listen is not None else None
    try:
        from skillindex.serve.mcp import serve as run  # noqa: PLC0415
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("mcp", "mcp_types", "pydantic",
                                                              "anyio"):
            raise
        fail(ctx, INSTALL_HINT, EXIT_ERROR)
    options = options_of(ctx)
    with options.open() as index:
        run(index, http=address, page_size=page_size, poll_seconds=poll)
