"""Publishes the catalog's winners as a static `.well-known/agent-skills` site (discovery index
v0.2.0): each skill's indexed bytes, checked against the index, as a SKILL.md or a
deterministic .tar.gz, and the index naming each with its sha256 digest."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skillindex import fsio
from skillindex.index.hashing import read_file
from skillindex.model import SkillManifest

SCHEMA = "https://schemas.agentskills.io/discovery/0.2.0/schema.json"
FOLDER = Path(".well-known") / "agent-skills"
# The name grammar a well-known index allows: lowercase letters, digits and single hyphens.
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_DESCRIPTION = 1024


@dataclass(frozen=True, slots=True)
class Published:
    """One skill written to the site, or why it was left out."""

    name: str
    kind: str | None  # skill-md or archive; None when left out
    url: str | None
    digest: str | None
    reason: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "type": self.kind, "url": self.url, "digest": self.digest,
                "skipped": self.reason}


def publish(manifests: Iterable[SkillManifest], directory: Path) -> tuple[Path, list[Published]]:
    """Write every skill of `manifests` and the index under `directory`/.well-known; the path
    of the index written and what became of each skill."""
    site = directory / FOLDER
    done: list[Published] = []
    entries: list[dict[str, str]] = []
    for manifest in sorted(manifests, key=lambda each: each.name):
        if not _NAME.fullmatch(manifest.name) or len(manifest.name) > 64:
            done.append(Published(manifest.name, None, None, None,
                                  "the name is not one a .well-known index allows"))
            continue
        try:
            files = _indexed_bytes(manifest)
        except ValueError as exc:
            done.append(Published(manifest.name, None, None, None, str(exc)))
            continue
        if list(files) == ["SKILL.md"]:
            kind, url, data = "skill-md", f"{manifest.name}/SKILL.md", files["SKILL.md"][0]
        else:
            kind, url, data = "archive", f"{manifest.name}.tar.gz", _tar_gz(files)
        _write(site / url, data, directory)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        description = str(manifest.frontmatter.get("description") or "")[:MAX_DESCRIPTION]
        entries.append({"name": manifest.name, "type": kind, "description": description,
                        "url": url, "digest": digest})
        done.append(Published(manifest.name, kind, url, digest))
    index = json.dumps({"$schema": SCHEMA, "skills": entries}, indent=2, ensure_ascii=False)
    return _write(site / "index.json", (index + "\n").encode(), directory), done


def _indexed_bytes(manifest: SkillManifest) -> dict[str, tuple[bytes, bool]]:
    """Each file of the skill (relative path: bytes, executable), exactly as indexed, or
    ValueError naming the first that is not."""
    folder = manifest.candidate.real_path
    files: dict[str, tuple[bytes, bool]] = {}
    for entry in manifest.files:
        if entry.sha256 is None:
            raise ValueError(f"{entry.rel_path} is over the size limit, so never indexed")
        try:
            read = read_file(folder / entry.rel_path, keep_limit=entry.size,
                             follow_symlinks=False)
        except OSError as exc:
            raise ValueError(f"{entry.rel_path} cannot be read: {exc}") from None
        if read.data is None or read.sha256 != entry.sha256:
            raise ValueError(f"{entry.rel_path} changed since the last reindex; reindex, "
                             "review, then publish")
        files[entry.rel_path] = (read.data, bool(read.raw.st_mode & 0o111))
    return files


def _tar_gz(files: dict[str, tuple[bytes, bool]]) -> bytes:
    """The same bytes for the same files, whenever and wherever they are packed: sorted
    members, no times, owners or umask in them."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            data, executable = files[path]
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o755 if executable else 0o644
            info.mtime = 0
            info.uname = info.gname = ""
            archive.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, filename="") as compressed:
        compressed.write(raw.getvalue())
    return packed.getvalue()


def _write(path: Path, data: bytes, directory: Path) -> Path:
    return fsio.write(path, data, what="a published file", named=False, within=directory,
                      private=False)
