"""The `/skill:<name> [args]` message: the winner's SKILL.md body read and verified as a read
reads it (query/read.py), with its path and the arguments, and audited as `skill.command`."""

from __future__ import annotations

from collections.abc import Sequence

from skillindex.errors import CommandsDisabledError
from skillindex.index.skilldir import ENTRY
from skillindex.model import Level, SkillCommand
from skillindex.query import disclose, lookup
from skillindex.query.audit import audited
from skillindex.query.read import Store, rules_of
from skillindex.query.reader import Here


def command(store: Store, here: Here, name: str, args: str | Sequence[str] | None, *,
            session: str | None, reason: str | None) -> SkillCommand:
    """The message `/skill:<name> [args]` sends: the verified body, its path, the arguments."""
    joined = disclose.command_args(args)
    # Arguments given one by one were split by the caller's shell already.
    words = None if args is None or isinstance(args, str) else [str(word) for word in args]
    attempt = disclose.Attempt(disclose.COMMAND, Level.BODY, skill=name)
    with audited(store, attempt, reason=reason, session=session):
        if not here.settings.enable_skill_commands:
            raise CommandsDisabledError(
                "skill commands are switched off (enable_skill_commands = false)", skill=name)
        winner, expected = lookup.with_file(store, here, name, ENTRY)
        return disclose.skill_command(winner.candidate, expected, joined, attempt=attempt,
                                      rules=rules_of(here, winner.candidate), words=words,
                                      dialects=here.settings.dialects)
