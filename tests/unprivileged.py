"""Runs a reindex in a child process that cannot read some files, even when tests run as root."""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from skillindex.api import SkillIndex
from skillindex.config import Environment
from tests.conftest import root_settings, write_skill

NOBODY = 65534


def reindex_unprivileged(tmp_path: Path) -> dict[str, object]:
    # pytest's tmp_path sits in a 0700 folder another user cannot enter; use a world-readable one.
    base = Path(tempfile.mkdtemp(prefix="skillindex-unreadable-"))
    try:
        return _run(base, tmp_path)
    finally:
        for folder, _dirs, _files in os.walk(base):
            os.chmod(folder, 0o755)
        shutil.rmtree(base)


def _run(base: Path, tmp_path: Path) -> dict[str, object]:
    os.chmod(base, 0o755)
    root = base / "skills"
    write_skill(root, "ok")
    secret = write_skill(root, "secret")
    partial = write_skill(root, "partial")
    (partial / "references").mkdir()
    (partial / "references" / "locked.md").write_text("x")
    write_skill(root / "closed", "inner")
    write_skill(root, "zz-after")
    data = base / "data"
    data.mkdir()
    env = Environment(home=base, cwd=base, config_home=base / "c", data_home=base / "d")
    settings = root_settings(root, max_depth=2)
    db = str(data / "index.sqlite")
    SkillIndex.open(settings, db=db, env=env).close()
    if os.geteuid() == 0:
        for folder, _dirs, files in os.walk(base):
            os.chown(folder, 0, 0)
            for name in files:
                os.chmod(Path(folder) / name, 0o644)
        for path in [data, *data.iterdir()]:
            os.chown(path, NOBODY, NOBODY)
    os.chmod(secret / "SKILL.md", 0)
    os.chmod(partial / "references" / "locked.md", 0)
    os.chmod(root / "closed", 0)
    log = tmp_path / "child.log"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            if os.geteuid() == 0:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            with SkillIndex.open(settings, db=db, env=env) as index:
                index.reindex()
            code = 0
        except BaseException:
            log.write_text(traceback.format_exc())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, log.read_text() if log.exists() else status
    with SkillIndex.open(settings, db=db, env=env) as index:
        found = {c.directory.name: c for c in index.candidates()}
        [state] = index.roots()
    return {
        "ok": str(found["ok"].status),
        "after": str(found["zz-after"].status),
        "secret_skill": [f.code for f in found["secret"].findings],
        "resource_findings": [f.code for f in found["partial"].findings],
        "partial": str(found["partial"].status),
        "problems": [p.code for p in state.problems],
    }


def run_unprivileged(setup: Callable[[Path], tuple[Path, object]]) -> str:
    """`setup(base)` prepares files as root in a folder others may enter and returns a folder
    and a function; the function then runs as nobody and its text comes back."""
    base = Path(tempfile.mkdtemp(prefix="skillindex-unprivileged-"))
    os.chmod(base, 0o755)
    try:
        _folder, child = setup(base)
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                os.close(reader)
                if os.geteuid() == 0:
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                os.write(writer, str(child()).encode())  # type: ignore[operator]
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(writer)
        with os.fdopen(reader, "rb") as pipe:
            text = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        return text
    finally:
        for folder, _dirs, _files in os.walk(base):
            os.chmod(folder, 0o755)
        shutil.rmtree(base)
