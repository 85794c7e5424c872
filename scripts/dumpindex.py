"""Prints every table of a SQLite index in a fixed order, leaving out only what differs from
one run to the next (times, durations, what the audit chain derives from them), so that two
indexes built from the same tree can be compared with diff:

    python scripts/dumpindex.py a.sqlite > a.txt; python scripts/dumpindex.py b.sqlite > b.txt
    diff a.txt b.txt

or `--compare a.sqlite b.sqlite`, which exits 1 and names the first differing table.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Iterator

# Columns that hold when something ran, not what was found.
VOLATILE = {"started_at", "finished_at", "duration_s", "time", "taken_at", "heartbeat_at",
            "expires_at", "created_at", "updated_at", "audit_head", "built_at", "owner",
            "pid", "host", "token", "acquired_at", "renewed_at", "computed_at"}


def dump(path: str) -> Iterator[str]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE "
            "'CREATE VIRTUAL%' ORDER BY name")]
        for table in tables:
            columns = [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]
            kept = [name for name in columns if name not in VOLATILE]
            left = sorted(set(columns) - set(kept))
            yield f"== {table} ({', '.join(kept)})" + (f" without {', '.join(left)}" if left
                                                      else "")
            listed = ", ".join(f'"{name}"' for name in kept)
            rows = connection.execute(f'SELECT {listed} FROM "{table}"').fetchall()
            for row in sorted(rows, key=repr):
                yield repr(row)
    finally:
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("databases", nargs="+", metavar="SQLITE")
    parser.add_argument("--compare", action="store_true",
                        help="compare two indexes instead of printing one")
    args = parser.parse_args()
    if not args.compare:
        for line in dump(args.databases[0]):
            print(line)
        return 0
    first, second = (list(dump(path)) for path in args.databases[:2])
    if first == second:
        print(f"the same: {len(first)} lines", file=sys.stderr)
        return 0
    table = "?"
    for one, other in zip(first, second, strict=False):
        table = one if one.startswith("== ") else table
        if one != other:
            print(f"they differ in {table}:\n- {one[:300]}\n+ {other[:300]}", file=sys.stderr)
            return 1
    print(f"one has more lines ({len(first)} against {len(second)})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
