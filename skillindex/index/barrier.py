"""Turns whatever goes wrong in the work for one skill (or one root) into a finding of it."""

from __future__ import annotations

from skillindex.errors import describe
from skillindex.model import Finding, Severity

INTERNAL_ERROR = "internal-error"


def internal_error(exc: BaseException, doing: str) -> Finding:
    """The finding of a skill whose work failed in a way no rule foresaw: the skill is
    rejected with it (and judged again at the next reindex), every other skill goes on."""
    return Finding(INTERNAL_ERROR, Severity.ERROR,
                   f"{doing} failed: {describe(exc)} (a defect of skillindex: please report it)")
