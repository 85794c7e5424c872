"""How many examples the property tests of supplied inputs try: few in CI, as many as
$SKILLINDEX_FUZZ_EXAMPLES asks for in a longer run."""

from __future__ import annotations

import os


def examples(default: int) -> int:
    asked = os.environ.get("SKILLINDEX_FUZZ_EXAMPLES")
    return int(asked) if asked else default
