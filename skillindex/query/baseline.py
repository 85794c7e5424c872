"""Findings baselines for CI: findings accepted once, each by stable fingerprint with a reason."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillindex import fsio, inputs
from skillindex.errors import ConfigError
from skillindex.model import FileFinding
from skillindex.query.check import shown
from skillindex.query.sarif import fingerprints

VERSION = 1
# Far more than any repository's findings; a bigger file is not a baseline this wrote.
MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Entry:
    """One accepted finding: what matches it (the fingerprint), what it was, and why accepted."""

    fingerprint: str
    code: str
    path: str
    message: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"fingerprint": self.fingerprint, "code": self.code, "path": self.path,
                "message": self.message, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Baseline:
    entries: tuple[Entry, ...]

    def reasons(self) -> dict[str, str]:
        return {entry.fingerprint: entry.reason for entry in self.entries}

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "tool": "skillindex",
                "findings": [entry.as_dict() for entry in self.entries]}


@dataclass(frozen=True, slots=True)
class Compared:
    """Findings split by a baseline: new ones, accepted ones (with the entry), and entries that
    no longer match any finding (stale: fixed, or changed beyond recognition)."""

    new: tuple[FileFinding, ...]
    suppressed: tuple[tuple[FileFinding, Entry], ...]
    stale: tuple[Entry, ...]


def of_findings(findings: Sequence[FileFinding], *, base: Path, reason: str | None,
                previous: Baseline | None = None) -> Baseline:
    """A baseline accepting every finding; one already in `previous` keeps its reason, the
    others get `reason`, which is then required (a ConfigError names what is missing)."""
    kept = previous.reasons() if previous else {}
    entries = []
    for finding, fingerprint in zip(findings, fingerprints(findings, base=base), strict=True):
        why = kept.get(fingerprint) or reason
        if not why:
            raise ConfigError("a baseline entry needs a reason: give --reason TEXT "
                              "(why these findings are accepted)")
        entries.append(Entry(fingerprint, finding.code, shown(finding.file, base),
                             finding.message, why))
    return Baseline(tuple(entries))


def compare(findings: Sequence[FileFinding], *, base: Path, baseline: Baseline) -> Compared:
    accepted = {entry.fingerprint: entry for entry in baseline.entries}
    new: list[FileFinding] = []
    suppressed: list[tuple[FileFinding, Entry]] = []
    matched: set[str] = set()
    for finding, fingerprint in zip(findings, fingerprints(findings, base=base), strict=True):
        entry = accepted.get(fingerprint)
        if entry is None:
            new.append(finding)
        else:
            suppressed.append((finding, entry))
            matched.add(fingerprint)
    stale = tuple(entry for entry in baseline.entries if entry.fingerprint not in matched)
    return Compared(tuple(new), tuple(suppressed), stale)


def render(baseline: Baseline) -> str:
    return json.dumps(baseline.as_dict(), indent=2, ensure_ascii=False) + "\n"


def parse(text: str, *, source: str) -> Baseline:
    """The entries of a baseline file; anything else is a ConfigError naming the file."""
    try:
        document = inputs.load_json(text, what="baseline", source=source)
    except inputs.InputError as exc:
        raise ConfigError(f"not a baseline file: {exc.reason}", source=source) from exc
    if not isinstance(document, dict) or not isinstance(document.get("findings"), list):
        raise ConfigError('not a baseline file: no "findings" list', source=source)
    if document.get("version") != VERSION:
        raise ConfigError(f"baseline version {document.get('version')!r}; this reads version "
                          f"{VERSION}", source=source)
    entries = []
    for number, item in enumerate(document["findings"], 1):
        fields = _fields(item)
        if fields is None:
            raise ConfigError(f"baseline entry {number} needs string fields fingerprint, code, "
                              "path, message and a non-empty reason", source=source)
        entries.append(Entry(*fields))
    return Baseline(tuple(entries))


def _fields(item: object) -> tuple[str, str, str, str, str] | None:
    if not isinstance(item, dict):
        return None
    values = [item.get(key, "") for key in ("fingerprint", "code", "path", "message", "reason")]
    if not all(isinstance(value, str) for value in values) or not values[0] \
            or not values[4].strip():
        return None
    fingerprint, code, path, message, reason = values
    return fingerprint, code, path, message, reason


def read(path: Path) -> Baseline:
    """The baseline at `path`, read by the one bounded reader."""
    try:
        text, _ = inputs.read_text(path, max_bytes=MAX_BYTES, what="baseline")
    except FileNotFoundError as exc:
        raise ConfigError("cannot read the baseline: no such file", source=str(path)) from exc
    return parse(text, source=str(path))


def write(path: Path, baseline: Baseline) -> Path:
    """Writes the baseline by `fsio.write`: whole, and never through a symbolic link at the
    target (even one the user named), so a checkout cannot point the write elsewhere.
    Returns the real path written."""
    return fsio.write(path, render(baseline), what="the baseline", named=False, within=None,
                      private=False)


def stale_lines(stale: Iterable[Entry]) -> list[str]:
    return [f"stale baseline entry {entry.fingerprint}: {entry.code} in {entry.path} is no "
            f"longer found (accepted because: {entry.reason})" for entry in stale]


def suppressions(compared: Compared) -> Mapping[str, str]:
    return {entry.fingerprint: entry.reason for _, entry in compared.suppressed}
