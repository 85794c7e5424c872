"""skillindex: a persistent, SQL-backed, audited catalog of Agent Skills."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillindex.errors import SkillIndexError

if TYPE_CHECKING:
    from skillindex.api import SkillIndex

__all__ = ["SkillIndex", "SkillIndexError"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The library entry point pulls in SQLAlchemy; load it only when it is asked for.
    if name == "SkillIndex":
        from skillindex.api import SkillIndex  # noqa: PLC0415

        return SkillIndex
    raise AttributeError(name)
