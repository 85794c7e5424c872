"""The hosts command: the MCP configuration that makes an agent host run `skillindex serve`."""

from __future__ import annotations

from pathlib import Path

import click

from skillindex.cli import params
from skillindex.cli.common import cli, echo, json_option, options_of, print_json, table
from skillindex.config import Environment
from skillindex.serve import hosts as formats


@cli.command()
@click.argument("host", metavar="[HOST]", required=False,
                type=click.Choice(list(formats.HOSTS)))
@click.option("--write", is_flag=True,
              help="Add the entry to the host's file, keeping its other servers and settings.")
@click.option("--file", "file", metavar="PATH", type=params.path(dir_okay=False),
              help="Another file in the host's format (e.g. ~/.gemini/settings.json); a "
              "symbolic link named here is followed to its file, one at the host's own path "
              "is refused.")
@json_option
@click.pass_context
def hosts(ctx: click.Context, host: str | None, write: bool, file: str | None,
          as_json: bool) -> None:
    """Print the configuration that makes an agent host use `skillindex serve` here.

    HOST is one of claude (.mcp.json), codex ($CODEX_HOME/config.toml, else
    ~/.codex/config.toml), cursor (.cursor/mcp.json), vscode (.vscode/mcp.json) or gemini
    (.gemini/settings.json). The entry runs this installation's executable by its absolute path
    with --cwd set to this directory and the --config, --db and --index in effect, so the host
    serves this same index. The file's text goes to stdout, notes to stderr. Without HOST, every
    host is listed with its file and whether skillindex is configured there.

    \b
    Examples:
      skillindex hosts                      # which hosts are configured
      skillindex hosts claude               # the .mcp.json entry, and `claude mcp add`
      skillindex hosts vscode --write       # add it to .vscode/mcp.json
      skillindex hosts gemini --write --file ~/.gemini/settings.json
    """
    options = options_of(ctx, as_json)
    if host is None and (write or file):
        raise click.UsageError("--write and --file need a HOST")
    env = Environment.from_os(cwd=options.cwd)
    server = formats.server_command(env, formats.installed_program(), config=options.config,
                                    db=options.db, index=options.index)
    if host is None:
        states = [formats.state(each, each.path(env), server)
                  for each in formats.HOSTS.values()]
        if options.json:
            print_json([item.as_dict() for item in states])
            return
        table(["host", "name", "status", "file"],
              [[item.host.key, item.host.title, item.status, item.path] for item in states])
        echo("`skillindex hosts HOST` prints a host's entry; `--write` adds it", err=True)
        return
    chosen = formats.HOSTS[host]
    path = Path(file).expanduser().absolute() if file else chosen.path(env)
    written = formats.write(chosen, path, server, named=file is not None,
                            within=None if file else chosen.base(env)) if write else None
    found = formats.state(chosen, path, server)
    if options.json:
        print_json({**found.as_dict(), "format": "toml" if chosen.toml else "json",
                    "docs": chosen.docs, "entry": formats.entry(chosen, server),
                    "command": server.argv, "text": formats.snippet(chosen, server),
                    "claude_command": formats.claude_command(server)
                    if chosen.key == "claude" else None,
                    "action": written.action if written else None,
                    "written": str(written.path) if written else None})
    elif written is not None:
        name, path = formats.SERVER_NAME, written.path
        echo({"created": f"{chosen.title}: wrote {path}",
              "added": f"{chosen.title}: added {name} to {path}",
              "updated": f"{chosen.title}: updated the {name} entry of {path}",
              "unchanged": f"{chosen.title}: {path} already starts this {name}; left as it was",
              }[written.action])
        echo(f"to check it: {chosen.check}")
    else:
        host_file = formats.snippet(chosen, server)  # its strings escaped as JSON or TOML
        click.echo(host_file, nl=False)
        echo(f"# {chosen.title}: {path} ({found.status}); format: {chosen.docs}", err=True)
        if chosen.key == "claude":
            echo(f"# or run: {formats.claude_command(server)}", err=True)
        if found.status is not formats.Status.CONFIGURED:
            echo(f"# `skillindex hosts {chosen.key} --write` adds it to that file", err=True)
    missing = formats.missing_index(env, options.db)
    if missing is not None:
        echo(f"note: there is no index at {missing} yet: `skillindex reindex` makes it",
             err=True)
    if not formats.serve_available():
        from skillindex.extras import hint  # noqa: PLC0415

        echo(f"note: skillindex serve needs the mcp extra: {hint('mcp')}", err=True)
