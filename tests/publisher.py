"""A skills publisher on loopback for the URL-root tests: a static `.well-known` site whose
files, answers and failures each test sets, counting what it was asked."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INDEX = "/.well-known/agent-skills/index.json"
SCHEMA = "https://schemas.agentskills.io/discovery/0.2.0/schema.json"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def skill_md(name: str, description: str = "Does a thing.", body: str = "# Body\n") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}".encode()


def tar_gz(files: dict[str, bytes], *, links: dict[str, str] | None = None,
           hardlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.startswith("scripts/") else 0o644
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
        for name, target in (hardlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.LNKTYPE
            info.linkname = target
            archive.addfile(info)
    return buffer.getvalue()


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@dataclass
class Publisher:
    """What the site serves (path: bytes), and what it was asked."""

    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (path, If-None-Match)
    cache_control: str = "no-cache"
    down: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def publish(self, entries: list[dict[str, str]], *, extra: dict[str, object] | None = None,
                path: str = INDEX) -> None:
        document: dict[str, object] = {"$schema": SCHEMA, "skills": entries, **(extra or {})}
        self.files[path] = json.dumps(document).encode()

    def add_skill_md(self, name: str, data: bytes, *, digest: str | None = None) -> dict[str, str]:
        path = f"/.well-known/agent-skills/{name}/SKILL.md"
        self.files[path] = data
        return {"name": name, "type": "skill-md", "description": "d", "url": path,
                "digest": digest or sha256(data)}

    def add_archive(self, name: str, data: bytes, *, suffix: str = ".tar.gz",
                    digest: str | None = None) -> dict[str, str]:
        path = f"/.well-known/agent-skills/{name}{suffix}"
        self.files[path] = data
        return {"name": name, "type": "archive", "description": "d",
                "url": f"{name}{suffix}", "digest": digest or sha256(data)}

    def downloads(self, path_part: str = "") -> int:
        return sum(1 for path, _ in self.requests if path_part in path and path != INDEX)


def _handler(site: Publisher) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            with site.lock:
                site.requests.append((self.path, self.headers.get("If-None-Match", "")))
            if site.down:
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = site.files.get(self.path)
            if data is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            tag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
            if self.headers.get("If-None-Match") == tag:
                self.send_response(304)
                self.send_header("ETag", tag)
                self.send_header("Cache-Control", site.cache_control)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", tag)
            self.send_header("Cache-Control", site.cache_control)
            kind = ("application/json" if self.path.endswith(".json") else
                    "application/gzip" if self.path.endswith(".tar.gz") else
                    "application/zip" if self.path.endswith(".zip") else "text/markdown")
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def serving() -> Iterator[Publisher]:
    site = Publisher()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
