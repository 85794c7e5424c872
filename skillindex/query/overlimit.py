"""What `check` can still judge of a skill over the size or file limits: the files that fit
within them are read and judged for risks and secrets, and one finding says what was not."""

from __future__ import annotations

from dataclasses import dataclass

from skillindex.index import risk
from skillindex.index.hashing import SkillDir, SpecialFileError
from skillindex.index.scanner import ENTRY, SkillScan
from skillindex.model import Finding, Limits

TOO_LARGE = "skill-too-large"


@dataclass(frozen=True, slots=True)
class Partial:
    """The risks of the files judged, and how many files and bytes were left unread."""

    risks: tuple[risk.Risk, ...]
    judged: int
    judged_bytes: int
    unread: int
    unread_bytes: int
    cut: bool  # the listing reached the file limit, where it stops: more may be there

    @property
    def message(self) -> str:
        parts = [f"check read {self.judged} files ({self.judged_bytes:,} bytes) within the "
                 "limits and judged them for risks and secrets"]
        if self.unread:
            parts.append(f"{self.unread} files ({self.unread_bytes:,} bytes) were not read "
                         "and are not judged")
        if self.cut:
            parts.append("files past the file limit are not listed, read or judged")
        return "; ".join(parts)


def over_limits(scan: SkillScan) -> bool:
    return _too_large(scan) is not None


def _too_large(scan: SkillScan) -> Finding | None:
    found = [scan.entry_problem, *scan.walk_findings]
    return next((f for f in found if f is not None and f.code == TOO_LARGE), None)


def judge_within_limits(scan: SkillScan, limits: Limits) -> Partial:
    """SKILL.md first, then the other files in path order, each read beneath the skill as a
    reindex reads it, while the count and the bytes stay within `limits`."""
    sizes = {entry.rel_path: entry.stat.size for entry in scan.resources}
    # The listing stops at the file limit, maybe before it met SKILL.md: read it anyway.
    names = [ENTRY, *sorted(name for name in sizes if name != ENTRY)]
    found: list[risk.Risk] = []
    judged = judged_bytes = unread = unread_bytes = 0
    with SkillDir(scan.real_dir) as skill:
        for name in names:
            try:
                size = sizes[name] if name in sizes else skill.lstat(name).st_size
            except OSError:
                continue  # no SKILL.md: the verdict says so
            if (size > limits.max_file_bytes or judged >= limits.max_skill_files
                    or judged_bytes + size > limits.max_skill_bytes):
                unread, unread_bytes = unread + 1, unread_bytes + size
                continue
            try:
                read = skill.read(name, keep_limit=risk.TEXT_LIMIT)
            except (OSError, SpecialFileError):  # gone or changed since listed: not judged
                unread, unread_bytes = unread + 1, unread_bytes + size
                continue
            judged, judged_bytes = judged + 1, judged_bytes + read.stat.size
            found += risk.judge_file(name, read.data, read.raw.st_mode)
    too_large = _too_large(scan)
    cut = too_large is not None and too_large.message.startswith(_COUNTED)
    return Partial(tuple(found), judged, judged_bytes, unread, unread_bytes, cut)


# How the listing's finding begins when it stopped at the file limit (index/skilldir.py).
_COUNTED = "the skill holds more than"
