"""What every use case is given besides its store: where it runs (`Here`), and the two signals a
store gives when it has no answer of its own.

A use case (query/read.py, query/lookup.py, ...) states the store it needs as a small Protocol;
the library passes `query.library.Library` (SQLAlchemy sessions on the engine), the sqlite3 fast
path `query.oneshot.Fast` (one connection), to the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from skillindex.config import Settings
from skillindex.model import RiskPolicy, RootSpec
from skillindex.query.resolve import Rules, set_key

RootRuns = list[tuple[str, int]]  # (root path, its last run) as store/sql.py's ROOT_RUNS reads


class Unanswered(Exception):
    """The store cannot answer this request by itself (the fast path, for anything beyond its
    statements): nothing was disclosed or written, and the caller takes the library's path."""


class NotStored(Exception):
    """No resolution of these roots is stored, nor can one be (a root quarantines, or the
    database is read-only and has none yet): the names are resolved from their candidates."""


@dataclass(frozen=True, slots=True)
class Here:
    """The settings and the roots that apply to one working directory, as the use cases read
    them."""

    settings: Settings
    roots: tuple[RootSpec, ...]
    rules: Rules = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", Rules.from_settings(self.settings))

    @classmethod
    def of(cls, settings: Settings, roots: Sequence[RootSpec]) -> Here:
        return cls(settings, tuple(roots))

    @property
    def index_name(self) -> str:
        return self.settings.index_name

    @property
    def paths(self) -> list[str]:
        return [str(spec.path) for spec in self.roots]

    @property
    def by_precedence(self) -> list[RootSpec]:
        """The roots in the order candidates are listed: by precedence, then registration."""
        return sorted(self.roots, key=lambda spec: (-spec.precedence, spec.position))

    @property
    def quarantining(self) -> bool:
        """Whether a root here holds risky skills back until approved, or advisory feeds are
        named: then the winners depend on approvals or feeds as well, and are resolved at each
        query, not stored."""
        return bool(self.settings.advisories) or any(
            spec.risk_policy is RiskPolicy.QUARANTINE for spec in self.roots)

    @property
    def policies(self) -> dict[str, RiskPolicy]:
        return {str(spec.path): spec.risk_policy for spec in self.roots}

    def set_key(self, runs: RootRuns) -> str:
        """The name of the stored resolution of these roots, given their last runs."""
        return set_key(runs, self.roots, self.rules)

    @property
    def key_of(self) -> Callable[[RootRuns], str]:
        return self.set_key
