"""Trust in what is loaded: lock files."""

from __future__ import annotations

from pathlib import Path

import click

from skillindex.cli.common import cli, echo, json_option, options_of, print_json
from skillindex.errors import ConfigError
from skillindex.query import lockfile


@cli.command()
@click.option("--output", "-o", metavar="PATH", type=click.Path(dir_okay=False),
              help=f"Write the lock file here (default: {lockfile.FILE_NAME} in the working "
              "directory; `-` prints it).")
@json_option
@click.pass_context
def lock(ctx: click.Context, output: str | None, as_json: bool) -> None:
    """Write skills-lock.json (the `skills` CLI's format) for the skills in the catalog.

    Each skill's folder is hashed as the `skills` CLI hashes it (`computedHash`); a skill
    already in the file keeps its `source` and `sourceType`. `skillindex verify --lock`
    compares the catalog with it later.

    \b
    Examples:
      skillindex lock && git add skills-lock.json
    """
    options = options_of(ctx, as_json)
    with options.open() as index:
        target = None if output == "-" else Path(output or index.env.cwd / lockfile.FILE_NAME)
        previous = lockfile.read(target) if target is not None and target.exists() else {}
        entries = index.lock(previous)
    text = lockfile.render(entries)
    if target is None:
        click.echo(text, nl=False)
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the lock file: {exc.strerror}", source=str(target)) \
            from exc
    if options.json:
        print_json({"path": str(target), "skills": {k: v.as_json() for k, v in entries.items()}})
    else:
        echo(f"wrote {target}: {len(entries)} skills")
