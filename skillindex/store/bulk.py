"""Inserts many rows through the driver's own executemany."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, insert


def insert_rows(connection: Connection, table: Table, names: Sequence[str],
                rows: list[tuple[Any, ...]]) -> None:
    """Insert `rows` (tuples of the columns `names`, as the driver binds them: no column of
    `table` may need SQLAlchemy's bind processing) with one executemany. SQLAlchemy's per-row
    parameter handling cost more than the insert itself."""
    style = connection.dialect.paramstyle
    if style not in ("qmark", "format", "pyformat"):
        connection.execute(insert(table), [dict(zip(names, row, strict=True)) for row in rows])
        return
    quote = connection.dialect.identifier_preparer.quote
    mark = "?" if style == "qmark" else "%s"
    statement = (f"INSERT INTO {quote(table.name)} ({', '.join(map(quote, names))}) "
                 f"VALUES ({', '.join([mark] * len(names))})")
    connection.exec_driver_sql(statement, rows)
