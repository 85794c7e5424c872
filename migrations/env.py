"""Alembic environment: migrates the connection skillindex hands over, or the configured one."""

from __future__ import annotations

from alembic import context

from skillindex.config import Environment, database_url
from skillindex.store.engine import make_engine
from skillindex.store.models import Base, modelled

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or database_url(None, Environment.from_os())
    engine = make_engine(url)
    with engine.begin() as owned:
        _run(owned)
    engine.dispose()


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        include_object=modelled,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
