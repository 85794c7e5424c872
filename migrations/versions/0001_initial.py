"""The initial schema: runs, roots, candidates, findings, resources, scan issues, the catalog
cache, the audit table, its append-only triggers and the auditor views.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from skillindex.store.migrate import refuse_to_discard_audit

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = {
    # Every accepted candidate with its rank for its name by precedence across all indexed roots;
    # the catalog a host sees also applies source filters and the roots of its working directory.
    "catalog_view": """
        SELECT r.index_name, c.name, c.description, c.skill_path AS location, c.dir_path,
               r.path AS root, r.scope, r.provider, r.precedence, c.enabled,
               c.xxh3, c.sha256, c.changed_run_id,
               ROW_NUMBER() OVER (
                   PARTITION BY r.index_name, c.name
                   ORDER BY r.precedence DESC, r.position, c.rel_dir
               ) AS rank
        FROM candidate c JOIN root r ON r.id = c.root_id
        WHERE c.status = 'accepted'
    """,
    "rejection_view": """
        SELECT r.index_name, c.name, c.dir_name, c.skill_path AS path, r.path AS root, r.scope,
               r.provider, f.code, f.severity, f.message
        FROM candidate c
        JOIN root r ON r.id = c.root_id
        JOIN finding f ON f.candidate_id = c.id
        WHERE c.status = 'rejected' AND f.severity = 'error'
    """,
    "load_event_view": """
        SELECT e.id, e.index_name, e.time, e.event, e.skill, e.resource, e.level,
               CASE e.level WHEN 1 THEN 'catalog' WHEN 2 THEN 'body' ELSE 'resource' END
                   AS level_name,
               e.bytes, e.digest, e.outcome, e.reason, e.session, e.path
        FROM load_event e
    """,
}


def upgrade() -> None:
    op.create_table(
        "index_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cwd", sa.Text(), nullable=False),
        sa.Column("all_roots", sa.Boolean(), nullable=False),
        sa.Column("roots", sa.Integer(), nullable=False),
        sa.Column("seen", sa.Integer(), nullable=False),
        sa.Column("added", sa.Integer(), nullable=False),
        sa.Column("changed", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("removed", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.Column("files_read", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_index_run")),
    )
    op.create_table(
        "root",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(length=20), nullable=False),
        sa.Column("provider", sa.String(length=100), nullable=False),
        sa.Column("precedence", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("max_depth", sa.Integer(), nullable=False),
        sa.Column("require_description", sa.Boolean(), nullable=False),
        sa.Column("validation", sa.String(length=20), nullable=False),
        sa.Column("name_prefix", sa.String(length=200), nullable=False),
        sa.Column("present", sa.Boolean(), nullable=False),
        sa.Column("last_run_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_root")),
        sa.UniqueConstraint("index_name", "path", name=op.f("uq_root_index_name")),
    )
    op.create_table(
        "candidate",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("root_id", sa.Integer(), nullable=False),
        sa.Column("rel_dir", sa.Text(), nullable=False),
        sa.Column("dir_name", sa.Text(), nullable=False),
        sa.Column("dir_path", sa.Text(), nullable=False),
        sa.Column("skill_path", sa.Text(), nullable=False),
        sa.Column("real_path", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("frontmatter", sa.Text(), nullable=True),
        sa.Column("tree_key", sa.String(length=32), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=True),
        sa.Column("inode", sa.BigInteger(), nullable=True),
        sa.Column("device", sa.BigInteger(), nullable=True),
        sa.Column("xxh3", sa.String(length=32), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("first_run_id", sa.Integer(), nullable=False),
        sa.Column("changed_run_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["root_id"], ["root.id"], name=op.f("fk_candidate_root_id_root"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_candidate")),
        sa.UniqueConstraint("root_id", "rel_dir", name=op.f("uq_candidate_root_id")),
    )
    op.create_index("ix_candidate_name", "candidate", ["name"], unique=False)
    op.create_table(
        "finding",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=50), nullable=False),
        sa.Column("severity", sa.String(length=10), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidate.id"],
                                name=op.f("fk_finding_candidate_id_candidate"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_finding")),
    )
    op.create_index(op.f("ix_finding_candidate_id"), "finding", ["candidate_id"], unique=False)
    op.create_table(
        "resource",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("rel_path", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("inode", sa.BigInteger(), nullable=False),
        sa.Column("device", sa.BigInteger(), nullable=False),
        sa.Column("xxh3", sa.String(length=32), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["candidate_id"], ["candidate.id"],
                                name=op.f("fk_resource_candidate_id_candidate"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resource")),
        sa.UniqueConstraint("candidate_id", "rel_path", name=op.f("uq_resource_candidate_id")),
    )
    op.create_table(
        "scan_issue",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("root_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("code", sa.String(length=50), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["root_id"], ["root.id"], name=op.f("fk_scan_issue_root_id_root"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scan_issue")),
    )
    op.create_index(op.f("ix_scan_issue_root_id"), "scan_issue", ["root_id"], unique=False)
    op.create_table(
        "catalog_cache",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_cache")),
        sa.UniqueConstraint("index_name", "key", name=op.f("uq_catalog_cache_index_name")),
    )
    op.create_table(
        "load_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("index_name", sa.String(length=100), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(length=50), nullable=False),
        sa.Column("skill", sa.Text(), nullable=True),
        sa.Column("resource", sa.Text(), nullable=True),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("session", sa.Text(), nullable=True),
        sa.Column("path", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_load_event")),
    )
    op.create_index("ix_load_event_session", "load_event", ["session"], unique=False)
    op.create_index("ix_load_event_skill", "load_event", ["skill"], unique=False)
    _create_append_only_guard()
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    refuse_to_discard_audit("drop the audit table")
    for name in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {name}")
    _drop_append_only_guard()
    op.drop_index("ix_load_event_skill", table_name="load_event")
    op.drop_index("ix_load_event_session", table_name="load_event")
    op.drop_table("load_event")
    op.drop_table("catalog_cache")
    op.drop_index(op.f("ix_scan_issue_root_id"), table_name="scan_issue")
    op.drop_table("scan_issue")
    op.drop_table("resource")
    op.drop_index(op.f("ix_finding_candidate_id"), table_name="finding")
    op.drop_table("finding")
    op.drop_index("ix_candidate_name", table_name="candidate")
    op.drop_table("candidate")
    op.drop_table("root")
    op.drop_table("index_run")


def _create_append_only_guard() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("""
            CREATE FUNCTION load_event_append_only() RETURNS trigger AS $$
            BEGIN
                RAISE EXCEPTION 'load_event is append-only: % refused', TG_OP;
            END;
            $$ LANGUAGE plpgsql
        """)
        op.execute("""
            CREATE TRIGGER load_event_append_only
            BEFORE UPDATE OR DELETE OR TRUNCATE ON load_event
            FOR EACH STATEMENT EXECUTE FUNCTION load_event_append_only()
        """)
        return
    for action in ("UPDATE", "DELETE"):
        op.execute(f"""
            CREATE TRIGGER load_event_no_{action.lower()} BEFORE {action} ON load_event
            BEGIN SELECT RAISE(ABORT, 'load_event is append-only: {action} refused'); END
        """)


def _drop_append_only_guard() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS load_event_append_only ON load_event")
        op.execute("DROP FUNCTION IF EXISTS load_event_append_only()")
        return
    for action in ("update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS load_event_no_{action}")
