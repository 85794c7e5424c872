"""`skillindex serve`: the MCP skills extension, resources and tools over the SkillIndex facade."""

from __future__ import annotations

import base64
import json
import secrets
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, NoReturn

import anyio
from mcp import MCPError
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged
from mcp.types import RequestParams, Resource, ToolAnnotations
from mcp_types import CLIENT_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import StrictStr
from typing_extensions import TypedDict

from skillindex import __version__
from skillindex.api import SkillIndex
from skillindex.errors import (
    NotFoundError,
    PathRefusedError,
    QuarantinedError,
    SkillIndexError,
    SkillRejectedError,
)
from skillindex.index.dialect import files_in_play, host_fields, in_play
from skillindex.providers import project_top
from skillindex.query.catalog import CatalogItem, SearchHint
from skillindex.query.catalog import build as build_catalog
from skillindex.query.disclose import SCHEME, SkillRef, parse_uri_options
from skillindex.query.modes import manual_only
from skillindex.serve import skills
from skillindex.serve.auth import principal
from skillindex.serve.connections import connection_of

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
PAGE_SIZE = 500
POLL_SECONDS = 1.0
TTL_MS = 0  # the listing changes at any reindex; the server says so with list_changed
CACHE_SCOPE = "private"  # what is served depends on this user's roots and working directory
_LEGACY_SESSIONS = 64
_NAME_KEPT = 256  # of an unknown name load_skill was asked for, in its audit row
MAX_SEARCH_LIMIT = 50
# What the instructions' last line names as finding the skills they leave out.
SEARCH_TOOL = "the search_skills tool"
# Each part of an audit session (`mcp:<client>/<connection>`) is at most this many characters,
# so the whole stays within the audit's bound on a session and is never cut there.
SESSION_PART = 64
# Reads verified and audited at once, each in a worker thread: on a few cores more threads only
# contend for the interpreter's lock and the database's connections; the rest queue.
READERS = 8

class SkillMatch(TypedDict):
    """One result of search_skills."""

    name: str
    description: str
    uri: str
    score: float


class _ListParams(RequestParams):
    cursor: StrictStr | None = None


class _GetParams(RequestParams):
    uri: StrictStr


class _DirectoryParams(RequestParams):
    uri: StrictStr
    cursor: StrictStr | None = None


class Skills:
    """The published state of one index, refreshed when a reindex commits, and every answer."""

    def __init__(self, index: SkillIndex, *, page_size: int = PAGE_SIZE,
                 poll_seconds: float = POLL_SECONDS) -> None:
        if page_size < 1:
            raise ValueError("page_size must be 1 or more")
        self.index = index
        self.page_size = page_size
        self.poll_seconds = poll_seconds
        # One server process is one connection on stdio: this tells its audit rows apart.
        self.token = secrets.token_hex(4)
        self.bus = InMemorySubscriptionBus()
        self.legacy_sessions: list[Any] = []
        self.readers = anyio.CapacityLimiter(READERS)
        self.on_change: list[Callable[[], None]] = []
        # Told of each read asked (skill, level, bytes, outcome, principal): telemetry's hook.
        # (the request's ASGI scope, skill, level, bytes, outcome, principal)
        self.on_read: Callable[[Mapping[str, Any] | None, str, int, int, str, str | None],
                               None] | None = None
        self.publication = self._publish()
        self.instructions = self._instructions(self.publication)

    def _publish(self) -> skills.Publication:
        """A publication of the index as it is now, built as far as it is asked for."""
        # The generation is read first: a reindex that lands in between is seen at the next poll.
        generation = self.index.generation()
        # A page read from the store is exactly what the first skills/list page needs.
        return skills.Publication(generation,
                                  self.index.iter_stored_skills(page=self.page_size + 1))

    def _instructions(self, publication: skills.Publication) -> str:
        """The catalog `skillindex catalog` renders (its order, modes and budget), of the
        skills this server serves, each located by the skill:// URI of its SKILL.md; when it
        cannot show every skill, its last line says how many it leaves out and that
        search_skills finds them (unless `catalog_search_hint` is off)."""
        publication.extend(1)
        if not publication.skills:
            return "No skills are available from this server."
        catalog = self.index.catalog(search_hint=SEARCH_TOOL)
        items = []
        for entry in catalog.entries:  # a budget's worth, mostly the first skills
            skill = publication.served(entry.name)
            if skill is not None:
                items.append(CatalogItem(entry.name, entry.description, skill.uri))
        hint = None
        if self.index.settings.catalog_search_hint:
            budgeted = sum(1 for reason in catalog.omitted_reasons
                           if not reason.startswith("manual-only"))
            hint = SearchHint(SEARCH_TOOL, elsewhere=budgeted)
        text = build_catalog(items, max_chars=catalog.max_chars, fmt=catalog.format,
                             hint=hint).text
        return ("Skills from skillindex. Load a skill with the load_skill tool (by name) and "
                "read its files with read_skill_file (skill:// URIs from list_skills), or "
                "through the MCP skills extension (skills/list, resources/read); "
                "search_skills finds skills by what they do.\n\n" + text)

    def _newer(self) -> tuple[skills.Publication, str] | None:
        if self.index.generation() == self.publication.generation:
            return None
        publication = self._publish()
        return publication, self._instructions(publication)

    async def refresh(self) -> bool:
        """Publish again if a reindex committed since; True when something was announced."""
        # In a worker thread: requests keep being answered from the current state meanwhile.
        newer = await anyio.to_thread.run_sync(self._newer)
        if newer is None:
            return False
        self.publication, self.instructions = newer
        for callback in self.on_change:
            callback()
        await self.bus.publish(ResourcesListChanged())
        for session in list(self.legacy_sessions):
            try:
                await session.send_resource_list_changed()
            except Exception:  # a closed connection no longer needs telling
                self.legacy_sessions.remove(session)
        return True

    async def watch(self) -> None:
        while True:
            await anyio.sleep(self.poll_seconds)
            await self.refresh()
            # Build in the background what no request has needed yet, a chunk at a time, so
            # that reads and lookups by URI find it done.
            publication = self.publication
            if not publication.done:
                await anyio.to_thread.run_sync(publication.complete)

    async def completed(self) -> skills.Publication:
        """The current publication with every skill built (in a worker thread if need be)."""
        publication = self.publication
        if not publication.done:
            await anyio.to_thread.run_sync(publication.complete)
        return publication

    async def remember(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """Middleware keeping handshake-era connections, which learn of a change by a
        notification rather than a `subscriptions/listen` stream."""
        result = await call_next(ctx)
        session = ctx.session
        params = session.client_params
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and params is not None:
            # One connection's requests share its handshake parameters: keep its latest session.
            self.legacy_sessions = [s for s in self.legacy_sessions
                                    if s.client_params is not params][-_LEGACY_SESSIONS + 1:]
            self.legacy_sessions.append(session)
        return result

    async def declare(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        """Middleware completing a handshake-era `initialize` answer, which the SDK trims to
        that era's schema: the skills extension is declared there too (as the extension's
        reference SDK declares it, and as hosts of that era look for it), and resources say
        that their list changes, since such a connection is told of each reindex."""
        result = await call_next(ctx)
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        if ctx.method == "initialize" and isinstance(capabilities, dict):
            capabilities.setdefault("extensions", {skills.EXTENSION: {"directoryRead": True}})
            if isinstance(capabilities.get("resources"), dict):
                capabilities["resources"]["listChanged"] = True
        return result

    def read_asked(self, message: Mapping[str, Any]) -> tuple[str, str, str] | None:
        """(URI, method or tool, client name) of the read a JSON-RPC request asks for."""
        return _read_asked(message)

    async def refuse_read(self, read: tuple[str, str, str], peer: str) -> None:
        """Audit, as refused, a read asked without a valid token (the SDK answers it 401):
        the attempt is on record though nothing was disclosed."""
        uri, reason, client = read
        await anyio.to_thread.run_sync(partial(
            self.index._refuse_unserved, uri, outcome="refused",
            reason=f"{reason} without a valid token",
            session=f"mcp:{session_part(client)}/{session_part(peer)}"))

    async def summarize_refusals(self, peer: str, count: int, uri: str) -> None:
        """One row for the refused reads of a peer past those audited one by one."""
        await anyio.to_thread.run_sync(partial(
            self.index._refuse_unserved, uri, outcome="refused",
            reason=f"{count} refused requests from {peer} in the last minute",
            session=f"mcp:refused/{session_part(peer)}"))

    def session_label(self, ctx: ServerRequestContext[Any, Any] | None) -> str:
        """The audit session, `mcp:<client>/<connection>`: the client's own name and the
        connection (the id the server drew for the HTTP connection, else for this process),
        each escaped and bounded on its own (`session_part`), so no name can stand for
        another connection. Nothing the client sends names the connection."""
        name, connection = "unknown-client", self.token
        if ctx is not None:
            params = ctx.session.client_params
            if params is not None and params.client_info.name:
                name = params.client_info.name
            scope = getattr(ctx.request, "scope", None)
            drawn = connection_of(scope) if isinstance(scope, dict) else None
            if drawn is not None:
                connection = drawn
        return f"mcp:{session_part(name)}/{session_part(connection)}"

    # The extension's methods.

    async def list_skills(self, ctx: Any, params: _ListParams) -> dict[str, Any]:
        publication = self.publication
        start = self._offset(params.cursor, publication)
        end = start + self.page_size
        if not publication.has(end + 1):  # one more tells whether another page follows
            await anyio.to_thread.run_sync(publication.extend, end + 1)
        entries = publication.entries
        if start and start >= len(entries):
            raise _changed()
        result: dict[str, Any] = {"resultType": "complete", "skills": entries[start:end],
                                  "ttlMs": TTL_MS, "cacheScope": CACHE_SCOPE}
        if end < len(entries):
            result["nextCursor"] = _cursor(publication.generation, end)
        return result

    async def get_skill(self, ctx: Any, params: _GetParams) -> dict[str, Any]:
        skill = (await self.completed()).by_uri.get(params.uri)
        if skill is None:
            raise MCPError(INVALID_PARAMS, f"No skill is served at {params.uri}")
        return {"resultType": "complete", "skill": skill.entry, "ttlMs": TTL_MS,
                "cacheScope": CACHE_SCOPE}

    async def read_directory(self, ctx: Any, params: _DirectoryParams) -> dict[str, Any]:
        publication = await self.completed()
        children = publication.directory(params.uri)
        if children is None:
            kind = "is not a directory resource" if params.uri in publication.files else (
                "is not served")
            raise MCPError(INVALID_PARAMS, f"{params.uri} {kind}")
        start = self._offset(params.cursor, publication)
        if start and start >= len(children):
            raise _changed()
        result: dict[str, Any] = {"resultType": "complete",
                                  "resources": children[start:start + self.page_size]}
        if start + self.page_size < len(children):
            result["nextCursor"] = _cursor(publication.generation, start + self.page_size)
        return result

    def _offset(self, cursor: str | None, publication: skills.Publication) -> int:
        """Where a cursor of this publication starts; the caller checks it against the end."""
        if cursor is None:
            return 0
        try:
            generation, _, offset = base64.urlsafe_b64decode(cursor).decode().rpartition(":")
            start = int(offset)
        except ValueError:
            raise MCPError(INVALID_PARAMS, "Invalid cursor") from None
        if generation != publication.generation or start <= 0:
            raise _changed()
        return start

    # Reads: every attempt goes through the verified, audited disclosure of the index. They
    # block (file and database), so the async handlers run them in a worker thread.

    def read(self, uri: str, *, session: str, reason: str, principal: str | None = None,
             scope: Mapping[str, Any] | None = None) -> tuple[str | bytes, str]:
        """The bytes of a served file, verified against the index; an MCPError otherwise."""
        served = self.publication.complete().files.get(uri)
        if served is None:
            self._refuse_unserved(uri, session=session, reason=reason, principal=principal,
                                  scope=scope)
        try:
            disclosure = self.index.read_stored(uri, SkillRef(served.skill, served.rel_path),
                                                served.resolution, reason=reason,
                                                session=session, principal=principal)
        except SkillIndexError as exc:
            self._observe(scope, served.skill, 3, 0, exc.outcome, principal)
            raise _protocol_error(exc, uri) from None
        self._observe(scope, disclosure.skill, int(disclosure.level), len(disclosure.data), "ok",
                      principal)
        text = disclosure.text
        content: str | bytes = disclosure.data if text is None or "\x00" in text else text
        return content, served.mime_type

    def load(self, name: str, *, session: str, principal: str | None = None,
             scope: Mapping[str, Any] | None = None) -> str:
        """The body of a served skill (a level-2 load)."""
        skill = self.publication.served(name)
        if skill is None:
            # On record as `skillindex read` records it: every attempt is one audit row. The
            # name is the caller's, so the row keeps at most _NAME_KEPT characters of it.
            kept = name if len(name) <= _NAME_KEPT else name[:_NAME_KEPT] + "…"
            self.index._refuse_unserved(SCHEME + urllib.parse.quote(kept, safe=":"),
                                        outcome="not-found", reason="load_skill",
                                        session=session, principal=principal)
            self._observe(scope, kept, 2, 0, "not-found", principal)
            raise ToolError(self._rejected(name)
                            or f"no skill named {name!r} is served here; see list_skills")
        try:
            disclosure = self.index.read_stored(skills.base_uri(name), SkillRef(name, None),
                                                skill.resolution, reason="load_skill",
                                                session=session, principal=principal)
        except SkillIndexError as exc:
            self._observe(scope, name, 2, 0, exc.outcome, principal)
            raise ToolError(str(exc)) from None
        self._observe(scope, name, 2, len(disclosure.data), "ok", principal)
        return disclosure.text or ""

    def _observe(self, scope: Mapping[str, Any] | None, skill: str, level: int, size: int,
                 outcome: str, principal: str | None) -> None:
        if self.on_read is not None:
            self.on_read(scope, skill, level, size, outcome, principal)

    def search(self, query: str, limit: int,
               played: Sequence[str] | None = None) -> list[SkillMatch]:
        """The served skills that best match `query`, best first, at most `limit` (1 to
        MAX_SEARCH_LIMIT): as `skillindex search` ranks them, without the skills the catalog
        keeps from the model (manual-only), nor, given the files in play, the conditional
        skills none of them matches."""
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ToolError(f"limit must be from 1 to {MAX_SEARCH_LIMIT}, not {limit}")
        publication = self.publication
        wanted = limit
        while True:
            try:
                hits = self.index.search(query, limit=wanted)
            except SkillIndexError as exc:
                raise ToolError(str(exc)) from None
            found: list[SkillMatch] = []
            for hit in hits:
                skill = publication.served(hit.name)
                if skill is None or manual_only(hit.winner, self.index.settings.catalog):
                    continue
                if played is None or in_play(host_fields(skill.entry["frontmatter"])[0], played):
                    found.append(SkillMatch(name=hit.name, description=hit.description,
                                            uri=skill.uri, score=round(hit.score, 6)))
            if len(found) >= limit or len(hits) < wanted:
                return found[:limit]
            wanted *= 4

    def _refuse_unserved(self, uri: str, *, session: str, reason: str, principal: str | None,
                         scope: Mapping[str, Any] | None = None) -> NoReturn:
        outcome, message = "not-found", f"{uri} is not served"
        try:
            options = parse_uri_options(uri)
        except PathRefusedError as exc:
            outcome, message = exc.outcome, str(exc)
        else:
            rejected = self._rejected(options[-1].name)
            if rejected is not None:
                message = f"{uri} is not served: {rejected}"
        self.index._refuse_unserved(uri, outcome=outcome, reason=reason, session=session,
                                    principal=principal)
        self._observe(scope, uri, 3, 0, outcome, principal)
        raise MCPError(INVALID_PARAMS, message, {"uri": uri})

    def _rejected(self, name: str) -> str | None:
        """That `name` is a skill the index rejected or withholds (an advisory, quarantine),
        and why; None when it is not."""
        if name in self.publication.by_name:
            return None
        try:
            self.index.winner(name)
        except (SkillRejectedError, QuarantinedError) as exc:
            return str(exc)
        except SkillIndexError:
            return None
        return None


def session_part(text: str) -> str:
    """`text` percent-encoded (all but letters, digits and `-._~`), so it holds no `/`; past
    SESSION_PART characters it is cut at a whole character and ends in `…`, which no
    encoded text contains."""
    quoted = urllib.parse.quote(text, safe="-._~")
    if len(quoted) <= SESSION_PART:
        return quoted
    end = SESSION_PART - 1
    if "%" in quoted[end - 2:end]:  # never half an escape
        end = quoted.rindex("%", end - 2, end)
    return quoted[:end] + "…"


def _read_asked(request: Mapping[str, Any]) -> tuple[str, str, str] | None:
    params = request.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    info = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
    client = info.get("name") if isinstance(info, dict) else None
    client = client if isinstance(client, str) and client else "unknown-client"
    method = request.get("method")
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    uri: object = None
    reason = ""
    if method == "resources/read":
        uri, reason = params.get("uri"), "resources/read"
    elif method == "tools/call" and params.get("name") == "read_skill_file":
        uri, reason = arguments.get("uri"), "read_skill_file"
    elif method == "tools/call" and params.get("name") == "load_skill":
        name = arguments.get("name")
        uri, reason = (skills.base_uri(name) if isinstance(name, str) else None), "load_skill"
    return (uri, reason, client) if isinstance(uri, str) else None


def _changed() -> MCPError:
    return MCPError(INVALID_PARAMS, "Invalid cursor: the listing changed; list again")


def _cursor(generation: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{generation}:{offset}".encode()).decode()


def _protocol_error(exc: SkillIndexError, uri: str) -> MCPError:
    code = INVALID_PARAMS if isinstance(exc, NotFoundError | PathRefusedError) else INTERNAL_ERROR
    return MCPError(code, str(exc), {"uri": uri, "outcome": exc.outcome})


class _SkillsExtension(Extension):
    identifier = skills.EXTENSION

    def __init__(self, state: Skills) -> None:
        self.state = state

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("skills/list", _ListParams, self.state.list_skills),
            MethodBinding("skills/get", _GetParams, self.state.get_skill),
            MethodBinding("resources/directory/read", _DirectoryParams,
                          self.state.read_directory),
        )


class SkillServer(MCPServer[dict[str, Any]]):
    """An MCP server whose resources are the files of the skills the index serves."""

    def __init__(self, state: Skills, *, name: str = "skillindex",
                 authentication: tuple[AuthSettings, TokenVerifier] | None = None) -> None:
        self.state = state
        auth, verifier = authentication or (None, None)
        self.verifier = verifier

        @asynccontextmanager
        async def lifespan(_: MCPServer[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
            async with anyio.create_task_group() as group:
                group.start_soon(state.watch)
                try:
                    yield {}
                finally:
                    group.cancel_scope.cancel()

        super().__init__(name=name, version=__version__, instructions=state.instructions,
                         extensions=[_SkillsExtension(state)], lifespan=lifespan,
                         subscriptions=state.bus, auth=auth, token_verifier=verifier)
        state.on_change.append(self._new_instructions)
        self.middleware.append(state.remember)
        self.middleware.append(state.declare)
        self._add_tools()

    def _new_instructions(self) -> None:
        # The SDK reads the instructions from its low-level server at every handshake.
        self._lowlevel_server.instructions = self.state.instructions

    async def list_resources(self) -> list[Resource]:
        publication = await self.state.completed()
        return [Resource(uri=skill.uri, name=skill.name, description=skill.description,
                         mime_type=skills.MARKDOWN, _meta=skill.meta)
                for skill in publication.skills]

    async def read_resource(self, uri: Any, context: Any = None) -> list[ReadResourceContents]:
        ctx = _request_context(context)
        content, kind = await anyio.to_thread.run_sync(partial(
            self.state.read, str(uri), session=self.state.session_label(ctx),
            principal=principal_of(ctx), reason="resources/read", scope=request_scope(ctx)),
            limiter=self.state.readers)
        return [ReadResourceContents(content=content, mime_type=kind)]

    def _add_tools(self) -> None:
        state = self.state

        def list_skills(files: list[StrictStr] | None = None) -> str:
            """The skills this server serves: name, description, the URI of SKILL.md, and
            argument_hint and conditional (its paths globs) when the skill declares them.
            With `files` (the paths the work touches, relative to the project), a skill whose
            paths or globs match none of them is left out."""
            env = state.index.env
            played = None if files is None else files_in_play(files, env.cwd, project_top(env))
            listed = []
            for skill in state.publication.complete().skills:
                host, _ = host_fields(skill.entry["frontmatter"])
                if played is not None and not in_play(host, played):
                    continue
                row: dict[str, object] = {"name": skill.name, "description": skill.description,
                                          "uri": skill.uri}
                if host.argument_hint:
                    row["argument_hint"] = host.argument_hint
                if host.paths:
                    row["conditional"] = list(host.paths)
                listed.append(row)
            return json.dumps(listed, ensure_ascii=False)

        def load_skill(name: str, ctx: Context) -> str:
            """The instructions of a skill (its SKILL.md without the frontmatter), by name."""
            request = _request_context(ctx)
            return state.load(name, session=state.session_label(request),
                              principal=principal_of(request), scope=request_scope(request))

        def read_skill_file(uri: str, ctx: Context) -> str:
            """One file of a skill, by its skill:// URI (listed by list_skills and skills/get)."""
            request = _request_context(ctx)
            try:
                content, _ = state.read(uri, session=state.session_label(request),
                                        principal=principal_of(request),
                                        reason="read_skill_file",
                                        scope=request_scope(request))
            except MCPError as exc:
                raise ToolError(exc.error.message) from None
            if isinstance(content, bytes):
                raise ToolError(f"{uri} is not text ({len(content)} bytes); read it with "
                                "resources/read")
            return content

        def search_skills(query: str, limit: int = 10,
                          files: list[StrictStr] | None = None) -> list[SkillMatch]:
            """Find skills by what they do: the best matches for `query` (a task in plain
            words), best first, each with its name, description, the skill:// URI of its
            SKILL.md and its score; load one with load_skill. With `files` (the paths the work
            touches, relative to the project), a skill whose paths or globs match none of them
            is left out, as list_skills does."""
            env = state.index.env
            played = None if files is None else files_in_play(files, env.cwd, project_top(env))
            return state.search(query, limit, played)

        # Every tool only reads: a host may call them without asking (the audit row a read
        # appends is this server's record, not a change the client makes).
        read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                    idempotent_hint=True, open_world_hint=False)
        self.add_tool(search_skills, name="search_skills", structured_output=True,
                      annotations=read_only)
        self.add_tool(list_skills, name="list_skills", structured_output=False,
                      annotations=read_only)
        self.add_tool(load_skill, name="load_skill", structured_output=False,
                      annotations=read_only)
        self.add_tool(read_skill_file, name="read_skill_file", structured_output=False,
                      annotations=read_only)


def principal_of(ctx: ServerRequestContext[Any, Any] | None) -> str | None:
    """Who the SDK's bearer authentication found the request's token to stand for (its
    principal, for the audit); None on stdio or a server without authentication."""
    scope = request_scope(ctx)
    return principal(scope.get("user")) if scope is not None else None


def request_scope(ctx: ServerRequestContext[Any, Any] | None) -> dict[str, Any] | None:
    """The ASGI scope of the HTTP request a handler answers (None on stdio): the request's
    own task is not the handler's, so what the gates know travels in it."""
    scope = getattr(ctx.request, "scope", None) if ctx is not None else None
    return scope if isinstance(scope, dict) else None


def _request_context(context: Any) -> ServerRequestContext[Any, Any] | None:
    try:
        ctx = context.request_context if context is not None else None
    except ValueError:  # a Context outside a request
        return None
    return ctx if isinstance(ctx, ServerRequestContext) else None


def create_server(index: SkillIndex, *, page_size: int = PAGE_SIZE,
                  poll_seconds: float = POLL_SECONDS,
                  authentication: tuple[AuthSettings, TokenVerifier] | None = None,
                  ) -> SkillServer:
    return SkillServer(Skills(index, page_size=page_size, poll_seconds=poll_seconds),
                       authentication=authentication)


def serve(index: SkillIndex, *, page_size: int = PAGE_SIZE,
          poll_seconds: float = POLL_SECONDS) -> None:
    """Run over stdio until the client goes away (`serve/http.py` serves HTTP)."""
    anyio.run(create_server(index, page_size=page_size,
                            poll_seconds=poll_seconds).run_stdio_async)
