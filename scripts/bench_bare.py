"""The floor of a read over streamable HTTP: a bare MCP SDK server answering `resources/read`
from a dict in memory, with the SDK, uvicorn and transport `serve --http` uses, and no auth.

Run as `python -m scripts.bench_bare PORT BODIES.json` (BODIES: a JSON object of URI to text);
scripts/bench_http.py starts it beside `skillindex serve --http` in the same run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import MCPError
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer

INVALID_PARAMS = -32602


class Bare(MCPServer[dict[str, Any]]):
    """Every read is a dict lookup: no file, no index, no audit."""

    def __init__(self, bodies: dict[str, str]) -> None:
        super().__init__(name="bare", version="1")
        self.bodies = bodies

    async def read_resource(self, uri: Any, context: Any = None) -> list[ReadResourceContents]:
        body = self.bodies.get(str(uri))
        if body is None:
            raise MCPError(INVALID_PARAMS, f"{uri} is not served")
        return [ReadResourceContents(content=body, mime_type="text/markdown")]


def main() -> None:
    port, bodies = int(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    application = Bare(bodies).streamable_http_app(streamable_http_path="/mcp")
    # The same uvicorn settings `serve --http` runs with (serve/http.py), minus TLS.
    config = uvicorn.Config(application, host="127.0.0.1", port=port, log_level="info",
                            timeout_graceful_shutdown=5)
    anyio.run(uvicorn.Server(config).serve)


if __name__ == "__main__":
    main()
