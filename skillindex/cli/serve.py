"""The serve command: the index as an MCP server (skills extension, resources, tools)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from skillindex.cli import params
from skillindex.cli.common import cli, echo, fail, options_of, print_json, table
from skillindex.errors import EXIT_ERROR, EXIT_USAGE

if TYPE_CHECKING:
    from skillindex.api import SkillIndex
    from skillindex.serve.listen import Listen

# What serves HTTP only: given without --http it would be ignored, so it is refused.
_HTTP_ONLY = ("url", "tokens", "introspect", "issuer", "client_id", "scopes", "insecure_no_auth",
              "tls_cert", "tls_key", "requests_per_second", "bytes_per_minute", "log_format")
_FILE = params.FilePath(dir_okay=False, path_type=Path)
_URL = params.Text(max_length=8_000, empty=False)


@cli.group(invoke_without_command=True)
@click.option("--http", "listen", metavar="HOST:PORT", type=params.LISTEN,
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST "
              "defaults to 127.0.0.1).")
@click.option("--url", type=_URL, metavar="URL",
              help="The endpoint as clients reach it (default http://HOST:PORT/mcp; needed "
              "when HOST is 0.0.0.0 or behind a proxy): the OAuth resource and the one Host "
              "and Origin answered besides this machine's.")
@click.option("--tokens", type=_FILE, metavar="FILE",
              help="Require a bearer token from FILE (made by `serve token add`).")
@click.option("--introspect", type=_URL, metavar="URL",
              help="Require a bearer token the authorization server's RFC 7662 endpoint at "
              "URL calls active for this server; its secret comes from "
              "SKILLINDEX_CLIENT_SECRET.")
@click.option("--issuer", type=_URL, metavar="URL",
              help="The authorization server clients get tokens from (default: the origin of "
              "--introspect).")
@click.option("--client-id", type=params.NAME, metavar="ID",
              help="This server's client id at --introspect.")
@click.option("--scope", "scopes", type=params.NAME, multiple=True, metavar="SCOPE",
              help="A scope every token must hold (repeatable; with --introspect).")
@click.option("--insecure-no-auth", is_flag=True,
              help="Serve a non-loopback address without authentication.")
@click.option("--tls-cert", type=_FILE, metavar="FILE", help="Serve HTTPS with this "
              "certificate chain (PEM), with --tls-key.")
@click.option("--tls-key", type=_FILE, metavar="FILE", help="The certificate's private key.")
@click.option("--requests-per-second", type=params.Number(0, 1_000_000), metavar="N",
              help="Requests a second per principal (0: no limit; default [serve] "
              "requests_per_second, else 20).")
@click.option("--bytes-per-minute", type=params.BYTES, metavar="N",
              help="Response bytes a minute per principal (0: no limit; default [serve] "
              "bytes_per_minute, else 64 MiB).")
@click.option("--log-format", type=click.Choice(["text", "json"]), metavar="text|json",
              help="The server's log on stdout: a line a request, as text (default) or as JSON "
              "objects.")
@click.option("--page-size", type=params.PAGE, default=500, show_default=True, metavar="N",
              help="Skills per skills/list page (a skill is never split across pages).")
@click.option("--poll", type=params.seconds(0.05, 86_400), default=1.0, show_default=True,
              metavar="SECONDS", help="How often to look for a committed reindex.")
@click.option("--json", "as_json", is_flag=True,
              help="With --http, the log as JSON objects (as --log-format json); over stdio "
              "stdout carries only the protocol, which is JSON already.")
@click.pass_context
def serve(ctx: click.Context, listen: tuple[str, int] | None, url: str | None, tokens: Path | None,
          introspect: str | None, issuer: str | None, client_id: str | None,
          scopes: tuple[str, ...], insecure_no_auth: bool, tls_cert: Path | None,
          tls_key: Path | None, requests_per_second: float | None,
          bytes_per_minute: int | None, log_format: str | None, page_size: int, poll: float,
          as_json: bool) -> None:
    """Serve the skills of this directory over MCP (stdio unless --http).

    The winners that `skillindex list` shows are published through the MCP skills extension
    (skills/list, skills/get, resources/read, resources/directory/read) and the tools
    list_skills, search_skills, load_skill and read_skill_file. Every read is verified against
    the index and audited under the client's name. A reindex is noticed without a restart.

    Over HTTP off this machine a bearer token is required (--tokens or --introspect); each
    read is audited under the token's principal, and each principal is limited in requests a
    second and response bytes a minute (docs/serving.md).

    \b
    Examples:
      skillindex --cwd ~/project serve        # what a host's mcpServers entry runs
      skillindex serve --http 127.0.0.1:8765  # streamable HTTP at /mcp
      skillindex serve token add alice --tokens tokens.json
      skillindex serve --http 0.0.0.0:8765 --url https://skills.example.com/mcp \\
          --tokens tokens.json
    """
    if ctx.invoked_subcommand is not None:
        return
    given = {name for name in _HTTP_ONLY if ctx.params[name] not in (None, False, ())}
    if listen is None and given:
        flags = {param.name: param.opts[0] for param in ctx.command.params}
        fail(ctx, f"{flags[sorted(given)[0]]} is for HTTP: give --http HOST:PORT too",
             EXIT_USAGE)
    options = options_of(ctx, as_json)
    address = listen
    plan = None
    if address is not None:
        from skillindex.config import Environment, load_settings  # noqa: PLC0415
        from skillindex.serve import listen as listening  # noqa: PLC0415

        env = Environment.from_os(cwd=options.cwd)
        limits = load_settings(options.config, env).serve
        if requests_per_second is not None:
            limits = replace(limits, requests_per_second=requests_per_second or None)
        if bytes_per_minute is not None:
            limits = replace(limits, bytes_per_minute=bytes_per_minute or None)
        found = None
        if client_id is not None and env.client_secret is None:
            fail(ctx, "--client-id needs its secret in SKILLINDEX_CLIENT_SECRET", EXIT_USAGE)
        if introspect is not None:
            found = listening.Introspect(
                endpoint=introspect, issuer=issuer or listening.origin(introspect),
                client_id=client_id, client_secret=env.client_secret, scopes=scopes)
        plan = listening.plan(*address, url=url, tokens=tokens, introspect=found,
                              insecure_no_auth=insecure_no_auth, cert=tls_cert, key=tls_key,
                              limits=limits)
    try:
        run = _server(plan, page_size=page_size, poll_seconds=poll,
                      log_format=log_format or ("json" if options.json else "text"))
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("mcp", "mcp_types", "pydantic",
                                                              "anyio", "uvicorn", "starlette"):
            raise
        from skillindex.extras import hint  # noqa: PLC0415

        fail(ctx, f"skillindex serve needs the mcp extra: {hint('mcp')}", EXIT_ERROR)
    with options.open() as index:
        run(index)


def _server(plan: Listen | None, *, page_size: int, poll_seconds: float,
            log_format: str) -> Callable[[SkillIndex], None]:
    """The server to run over an index: stdio, or HTTP as planned (either imports the SDK)."""
    if plan is None:
        from skillindex.serve import mcp  # noqa: PLC0415
        return partial(mcp.serve, page_size=page_size, poll_seconds=poll_seconds)
    from skillindex.serve import http  # noqa: PLC0415
    return partial(http.serve, listen=plan, page_size=page_size, poll_seconds=poll_seconds,
                   log_format=log_format)


@serve.group()
def token() -> None:
    """The static bearer tokens of `serve --tokens FILE`: each names a principal.

    The file keeps only each token's sha256, its principal, an id and when it was made; it
    is written whole (mode 0600) at each change, and a running server reads it again when it
    changes, so a token added or removed counts from the next request.

    \b
    Examples:
      skillindex serve token add alice --tokens tokens.json   # prints the token, once
      skillindex serve token list --tokens tokens.json
      skillindex serve token remove alice --tokens tokens.json
    """


_TOKENS = click.option("--tokens", "path", type=_FILE, required=True, metavar="FILE",
                       help="The token file (made if missing).")


@token.command(name="add")
@click.argument("principal", type=params.NAME)
@_TOKENS
@click.option("--json", "as_json", is_flag=True, help="Print the token and its entry as JSON.")
@click.pass_context
def token_add(ctx: click.Context, principal: str, path: Path, as_json: bool) -> None:
    """Make a token for PRINCIPAL and print it, once: only its hash is kept.

    \b
    Examples:
      skillindex serve token add alice --tokens /etc/skillindex/tokens.json
      TOKEN=$(skillindex serve token add ci-bot --tokens tokens.json)
    """
    from skillindex.serve import tokens  # noqa: PLC0415

    secret, entry = tokens.add(path, principal)
    if options_of(ctx, as_json).json:
        print_json({"token": secret, **entry.as_dict()})
        return
    echo(secret)  # letters, digits, - and _: nothing to escape
    echo(f"token {entry.id} for {entry.principal} added to {path}; it is not shown again",
         err=True)


@token.command(name="list")
@_TOKENS
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def token_list(ctx: click.Context, path: Path, as_json: bool) -> None:
    """The tokens in the file: principal, id and when each was made (never the token).

    \b
    Examples:
      skillindex serve token list --tokens tokens.json
      skillindex serve token list --tokens tokens.json --json
    """
    from skillindex.serve import tokens  # noqa: PLC0415

    entries = tokens.listed(path)
    if options_of(ctx, as_json).json:
        print_json([{k: v for k, v in entry.as_dict().items() if k != "sha256"}
                    for entry in entries])
        return
    table(("PRINCIPAL", "ID", "CREATED"),
          [(entry.principal, entry.id, entry.created) for entry in entries])


@token.command(name="remove")
@click.argument("principal", type=params.NAME)
@_TOKENS
@click.option("--id", "token_id", type=params.NAME, metavar="ID",
              help="Only the token with this id.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@click.pass_context
def token_remove(ctx: click.Context, principal: str, path: Path, token_id: str | None,
                 as_json: bool) -> None:
    """Remove PRINCIPAL's tokens (or one, by --id); a running server refuses them at once.

    \b
    Examples:
      skillindex serve token remove alice --tokens tokens.json
      skillindex serve token remove alice --id 3f9a1c2b --tokens tokens.json
    """
    from skillindex.serve import tokens  # noqa: PLC0415

    gone = tokens.remove(path, principal, token_id)
    if options_of(ctx, as_json).json:
        print_json([{k: v for k, v in entry.as_dict().items() if k != "sha256"}
                    for entry in gone])
        return
    for entry in gone:
        echo(f"removed token {entry.id} of {entry.principal}")
