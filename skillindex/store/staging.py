"""Holds the rows of a reindex in temporary tables, so memory stays flat however many skills
change, and one short transaction moves them into the index."""

from __future__ import annotations

from collections.abc import Collection
from contextlib import nullcontext
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Integer,
    Join,
    MetaData,
    String,
    Table,
    Text,
    and_,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy import insert as sql_insert

from skillindex.model import RESOURCE_ROW
from skillindex.store import bulk, fts, resolved
from skillindex.store.models import Base

CANDIDATE, FINDING, RESOURCE, ROOT = (
    Base.metadata.tables[name] for name in ("candidate", "finding", "resource", "root"))
# The candidate columns a scan produces; ids, root and run numbers are set when applied.
CANDIDATE_COLUMNS = (
    "rel_dir", "dir_name", "dir_path", "skill_path", "real_path", "name", "description",
    "status", "enabled", "frontmatter", "tree_key", "size", "mtime_ns", "inode", "device",
    "xxh3", "sha256", "search_text", "disable_model_invocation", "ctime_ns",
    "host_fields", "signature")
FINDING_COLUMNS = ("code", "severity", "message", "path", "line")
RESOURCE_COLUMNS = RESOURCE_ROW  # as the judge makes them
BATCH = 2_000


# Where the inode and device numbers are among a row's scanned columns.
_CANDIDATE_IDS = tuple(CANDIDATE_COLUMNS.index(name) for name in ("inode", "device"))
_RESOURCE_IDS = tuple(RESOURCE_COLUMNS.index(name) for name in ("inode", "device"))


_HIGH_BIT = 2**63


def _signed(values: list[Any], ids: tuple[int, ...]) -> list[Any]:
    """What the FileId type does on bind: all 64 bits of an inode or device in a BIGINT."""
    for i in ids:
        if values[i] is not None and values[i] >= _HIGH_BIT:
            values[i] -= 2**64
    return values


def _like(table: Table, name: str) -> Column[Any]:
    return Column(name, table.c[name].type, nullable=True)


class Stage:
    """Staged candidates, findings and resources of one reindex, on one connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        metadata = MetaData()
        self.candidates = Table(
            "stage_candidate", metadata, Column("seq", Integer, primary_key=True),
            Column("root_path", Text), Column("previous_id", Integer),
            Column("first_run_id", Integer),
            *(_like(CANDIDATE, name) for name in CANDIDATE_COLUMNS), prefixes=["TEMPORARY"])
        self.findings = Table(
            "stage_finding", metadata, Column("seq", Integer),
            Column("code", String(50)), Column("severity", String(10)), Column("message", Text),
            Column("path", Text), Column("line", Integer), prefixes=["TEMPORARY"])
        self.resources = Table(
            "stage_resource", metadata, Column("seq", Integer),
            *(_like(RESOURCE, name) for name in RESOURCE_COLUMNS), prefixes=["TEMPORARY"])
        self.tables = (self.candidates, self.findings, self.resources)
        # Each table's rows as tuples of these columns, in this order.
        self.columns = (("seq", "root_path", "previous_id", "first_run_id", *CANDIDATE_COLUMNS),
                        ("seq", *FINDING_COLUMNS), ("seq", *RESOURCE_COLUMNS))
        self._rows: tuple[list[tuple[Any, ...]], ...] = ([], [], [])
        self.count = 0
        self._created = False  # a reindex that finds nothing new never creates the tables

    def _create(self) -> None:
        for table in self.tables:
            table.drop(self.connection, checkfirst=True)
            table.create(self.connection)
        self._created = True

    def add(self, root_path: str, row: dict[str, Any], previous_id: int | None,
            findings: list[dict[str, Any]], resources: list[tuple[Any, ...]]) -> None:
        """Stage one judged candidate; every BATCH candidates go to the database."""
        self.count += 1
        seq = self.count
        candidates, staged_findings, staged_resources = self._rows
        values = _signed([row.get(name) for name in CANDIDATE_COLUMNS], _CANDIDATE_IDS)
        candidates.append((seq, root_path, previous_id, None, *values))
        staged_findings.extend((seq, *[finding.get(name) for name in FINDING_COLUMNS])
                               for finding in findings)
        inode, device = _RESOURCE_IDS
        staged_resources.extend(
            (seq, *resource) if (resource[inode] or 0) < _HIGH_BIT > (resource[device] or 0)
            else (seq, *_signed(list(resource), _RESOURCE_IDS)) for resource in resources)
        if len(candidates) >= BATCH:
            with self.connection.begin():
                self._write_buffered()

    def _write_buffered(self) -> None:
        if not self._rows[0]:
            return
        if not self._created:
            self._create()
        for table, names, rows in zip(self.tables, self.columns, self._rows, strict=True):
            if rows:
                bulk.insert_rows(self.connection, table, names, rows)
                rows.clear()

    def prepare(self) -> None:
        """In the write transaction, before the replaced rows are deleted: stage what is left
        and carry over the first run of every candidate that is replaced."""
        self._write_buffered()
        if not self._created:
            return
        staged = self.candidates
        self.connection.execute(
            update(staged).where(staged.c.previous_id.is_not(None)).values(
                first_run_id=select(CANDIDATE.c.first_run_id)
                .where(CANDIDATE.c.id == staged.c.previous_id).scalar_subquery()))

    def keeps_resolution(self, removed: Collection[int]) -> bool:
        """In the write transaction, before the deletes: whether every staged candidate
        replaces one of `removed` (the candidates this reindex deletes, all of them replaced)
        with the same name, switch, status, SKILL.md path and real directory: all that
        resolution reads of a candidate (store/resolved.resolvable), so the winners stay the
        same but for their ids."""
        staged = self.candidates
        if not self._created:
            return not removed
        replaced = self.connection.execute(
            select(func.count()).select_from(staged).where(staged.c.previous_id.is_not(None))
        ).scalar_one()
        if replaced != len(removed):
            return False  # a skill added, or one gone
        differing = self.connection.execute(
            select(func.count()).select_from(staged.outerjoin(
                CANDIDATE, CANDIDATE.c.id == staged.c.previous_id))
            .where(or_(CANDIDATE.c.id.is_(None),
                       *(staged.c[name].is_distinct_from(CANDIDATE.c[name])
                         for name in resolved.RESOLVED_COLUMNS)))).scalar_one()
        return int(differing) == 0

    def replacements(self, index_name: str) -> list[tuple[int, int]]:
        """After `move`: (replaced candidate id, its new id) for every staged replacement."""
        if not self._created:
            return []
        staged = self.candidates
        _root, _with_root, placed = self._placed(index_name)
        found = self.connection.execute(
            select(staged.c.previous_id, CANDIDATE.c.id).select_from(placed)
            .where(staged.c.previous_id.is_not(None)))
        return [(int(old), int(new)) for old, new in found]

    def added(self, index_name: str) -> list[int]:
        """After `move`: the ids of every candidate it added."""
        if not self._created:
            return []
        _root, _with_root, placed = self._placed(index_name)
        return [int(cid) for (cid,) in self.connection.execute(
            select(CANDIDATE.c.id).select_from(placed))]

    def _placed(self, index_name: str) -> tuple[Any, Join, Join]:
        """The staged candidates' root (an alias), the staged candidates joined to it, and
        that joined to the candidate stored at the same place (root and directory)."""
        staged = self.candidates
        root = ROOT.alias("staged_root")
        with_root = staged.join(root, and_(root.c.index_name == index_name,
                                           root.c.path == staged.c.root_path))
        return root, with_root, with_root.join(
            CANDIDATE, and_(CANDIDATE.c.root_id == root.c.id,
                            CANDIDATE.c.rel_dir == staged.c.rel_dir))

    def move(self, index_name: str, run_id: int) -> None:
        """In the write transaction, after the deletes: one INSERT ... SELECT per table."""
        if not self._created:
            return
        staged = self.candidates
        root, with_root, with_candidate = self._placed(index_name)
        insert = sql_insert(CANDIDATE).from_select(
            ["root_id", *CANDIDATE_COLUMNS, "first_run_id", "changed_run_id"],
            select(root.c.id, *(staged.c[name] for name in CANDIDATE_COLUMNS),
                   func.coalesce(staged.c.first_run_id, literal(run_id)), literal(run_id))
            .select_from(with_root))
        with (fts.filled_at_once(self.connection.exec_driver_sql)
              if self.connection.dialect.name == "sqlite" else nullcontext()):
            self.connection.execute(insert)
        for table, target, names in ((self.findings, FINDING, FINDING_COLUMNS),
                                     (self.resources, RESOURCE, RESOURCE_COLUMNS)):
            self.connection.execute(sql_insert(target).from_select(
                ["candidate_id", *names],
                select(CANDIDATE.c.id, *(table.c[name] for name in names))
                .select_from(table.join(with_candidate, table.c.seq == staged.c.seq))))

    def drop(self) -> None:
        if not self._created:
            return
        with self.connection.begin():
            for table in reversed(self.tables):
                table.drop(self.connection, checkfirst=True)
