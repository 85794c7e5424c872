"""Writes migrations/sqlite_head.sql: the schema the migrations leave in a new SQLite database,
which a new database is then given in one go (skillindex/store/migrate.py). Run it after adding
a migration; tests/test_store.py fails until it has been run.

    python scripts/sqlite_head.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from skillindex.store import migrate
from skillindex.store.engine import make_engine

TARGET = Path(__file__).resolve().parents[1] / "migrations" / migrate.SQLITE_HEAD


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        engine = make_engine(f"sqlite:///{Path(work) / 'head.sqlite'}")
        migrate.upgrade(engine)
        TARGET.write_text(migrate.sqlite_head_text(engine), encoding="utf-8")
        engine.dispose()
    print(f"wrote {TARGET}", file=sys.stderr)


if __name__ == "__main__":
    main()
