"""fsio: one writer, and every file a command writes goes through it: a property test over the
write targets of every command, and a walk of the code that finds no other writer."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import skillindex
from skillindex import fsio
from skillindex.errors import EXIT_REFUSED
from tests.conftest import write_skill
from tests.skilltrees import World, make_world

# --- the writer itself -------------------------------------------------------------------------


def test_a_new_file_is_written_whole_and_its_real_path_returned(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    written = fsio.write(tmp_path / "via" / "out.txt", ["a", "b"], what="the file", named=False,
                         within=tmp_path, private=False)
    assert written == real / "out.txt" and written.read_text() == "ab"
    assert [p.name for p in real.iterdir()] == ["out.txt"]  # no temporary file left


def test_the_old_mode_is_kept_and_private_files_are_0600(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    path.chmod(0o640)
    fsio.write(path, b"new", what="the file", named=False, within=tmp_path, private=False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_bytes() == b"new"
    fsio.write(path, b"secret", what="the file", named=False, within=tmp_path, private=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("named", [False, True], ids=["unnamed", "named"])
def test_a_dangling_link_is_refused_even_when_named(tmp_path: Path, named: bool) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "profile")
    with pytest.raises(fsio.WriteRefusedError, match="dangling"):
        fsio.write(tmp_path / "link", "x", what="the file", named=named, within=tmp_path,
                   private=False)
    assert not (tmp_path / "nowhere").exists()


def test_a_file_the_writer_cannot_replace_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    with pytest.raises(fsio.FileWriteError, match="cannot write the file"):
        fsio.write(tmp_path / "plain" / "below", "x", what="the file", named=True, within=None,
                   private=False)


# --- no other writer ---------------------------------------------------------------------------

PACKAGE = Path(skillindex.__file__).parent
# Each place that opens something for writing outside fsio, and why it may.
EXEMPT = {
    ("store/engine.py", "os.open"): "creates the store's own SQLite database file, 0600",
    ("index/recheck.py", "os.fdopen"): "the write end of a pipe to a worker process",
    ("cli/common.py", "os.open"): "os.devnull, put in place of a closed stdout",
    ("evaluate.py", "shutil.copytree"): "copies skills into the eval's own temporary folder",
    ("store/sqlitefile.py", "shutil.copyfile"): "a copy of the store's own SQLite file",
    ("index/remote.py", "os.symlink"): "a link in a URL root's own cache, made in its tmp/",
    ("index/remote.py", "os.replace"): "that link swapped into the cache's skills/ by rename",
    ("index/remote.py", "work.rename"): "a verified folder moved into the cache's objects/",
    ("query/wellknown.py", "open"): "tarfile.open packing an archive in memory (fileobj=)",
}
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}
# Path's methods that make or change a file, whatever object they are called on (`replace`
# is left out: str has one too).
_METHODS = {"write_text", "write_bytes", "mkstemp", "touch", "symlink_to", "hardlink_to",
            "rename"}
_ALWAYS = {"NamedTemporaryFile", "TemporaryFile", "copy", "copy2", "copyfile", "copytree",
           "move", "replace", "link", "symlink", "mkfifo", "truncate", *_METHODS}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def _mode(call: ast.Call, position: int) -> str | None:
    value = next((kw.value for kw in call.keywords if kw.arg == "mode"), None)
    if value is None and len(call.args) > position:
        value = call.args[position]
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) \
        else None if value is None else "?"


def writers(tree: ast.AST) -> list[tuple[str, int]]:
    """Each call in `tree` that may open, make or replace a file for writing."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        last = name.rsplit(".", 1)[-1]
        if name == "os.open":
            flags = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                     for n in ast.walk(node.args[1])} if len(node.args) > 1 else set()
            if flags & _WRITE_FLAGS:
                found.append((name, node.lineno))
        elif last in ("open", "fdopen"):
            function = name in ("open", "os.fdopen", "io.open")
            mode = _mode(node, 1 if function else 0)
            # A method's first argument is a mode only when it is a string (Path.open("w"));
            # SkillIndex.open(settings) is no file.
            if mode is not None and ((mode == "?" and function) or set(mode) & set("wax+")):
                found.append((name if last == "fdopen" else "open", node.lineno))
        elif last in _ALWAYS and (name.startswith(("os.", "shutil.", "tempfile."))
                                  or last in _METHODS):
            found.append((name, node.lineno))
    return found


def test_the_walk_finds_each_kind_of_writer() -> None:
    source = """
open(p, "w"); open(p, mode="ab"); p.open("x"); p.open("r+"); os.fdopen(fd, "wb")
p.write_text("t"); p.write_bytes(b""); os.open(p, os.O_WRONLY | os.O_CREAT)
os.replace(a, b); os.rename(a, b); shutil.copy(a, b); tempfile.mkstemp(); p.touch()
open(p); open(p, "rb"); os.open(p, os.O_RDONLY); "a".replace("a", "b")
"""
    assert [name for name, _ in writers(ast.parse(source))] == [
        "open", "open", "open", "open", "os.fdopen", "p.write_text", "p.write_bytes", "os.open",
        "os.replace", "os.rename", "shutil.copy", "tempfile.mkstemp", "p.touch"]


def test_no_module_but_fsio_opens_a_file_for_writing() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == "fsio.py":
            continue
        for name, line in writers(ast.parse(path.read_text(encoding="utf-8"))):
            if (module, name) not in EXEMPT:
                found.append(f"{module}:{line}: {name}")
    assert found == []


# --- every write target of every command ----------------------------------------------------

OLD_LOCK = '{\n  "version": 1,\n  "skills": {}\n}\n'
OLD_HOST = '{\n  "mcpServers": {\n    "other": {"command": "other"}\n  }\n}\n'
OLD_TOKENS = '{\n  "version": 1,\n  "tokens": []\n}\n'
OLD_BASELINE = '{\n  "version": 1,\n  "tool": "skillindex",\n  "findings": []\n}\n'
EXCLUDED = ("index.sqlite", "settings.toml")


@dataclass(frozen=True, slots=True)
class Command:
    """A command that writes one file: where, and under which of fsio's rules."""

    args: Callable[[Path], tuple[str, ...]]
    default: Callable[[World], Path] | None  # None: the user names the path
    follows_named_links: bool
    private: bool
    old: str


COMMANDS = {
    "lock": Command(lambda _: ("lock",), lambda w: w.cwd / "skills-lock.json", False, False,
                    OLD_LOCK),
    "lock --output": Command(lambda p: ("lock", "--output", str(p)), None, True, False,
                             OLD_LOCK),
    "hosts claude --write": Command(lambda _: ("hosts", "claude", "--write"),
                                    lambda w: w.cwd / ".mcp.json", False, False, OLD_HOST),
    "hosts vscode --write": Command(lambda _: ("hosts", "vscode", "--write"),
                                    lambda w: w.cwd / ".vscode" / "mcp.json", False, False,
                                    OLD_HOST),
    "hosts cursor --write --file": Command(
        lambda p: ("hosts", "cursor", "--write", "--file", str(p)), None, True, False, OLD_HOST),
    "report --html": Command(lambda p: ("report", "--html", str(p)), None, False, True, ""),
    "check --write-baseline": Command(
        lambda p: ("check", str(p.parent.parent / ".claude" / "skills" / "pdf"),
                   "--write-baseline", str(p), "--reason", "reviewed"), None, False, False,
        OLD_BASELINE),
    "serve token add": Command(lambda p: ("serve", "token", "add", "alice", "--tokens", str(p)),
                               None, False, True, OLD_TOKENS),
}
TARGETS = ["absent", "file", "link-file-inside", "link-file-outside", "dangling-inside",
           "dangling-outside", "link-dir", "chain-file", "chain-dangling", "loop"]
PARENTS = ["dir", "missing", "link-dir-inside", "link-dir-outside", "dangling"]
MODES = [0o600, 0o640, 0o644, 0o604, 0o400, 0o755, 0o660, 0o666]


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str
    mode: int
    detail: str  # a file's sha256, a link's target
    inode: int


def snapshot(root: Path) -> dict[str, Entry]:
    tree = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            if name.startswith(EXCLUDED):
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entry = Entry("link", 0, os.readlink(path), 0)
            elif stat.S_ISDIR(info.st_mode):
                entry = Entry("dir", stat.S_IMODE(info.st_mode), "", 0)
            else:
                entry = Entry("file", stat.S_IMODE(info.st_mode),
                              hashlib.sha256(path.read_bytes()).hexdigest(), info.st_ino)
            tree[str(path.relative_to(root))] = entry
    return tree


class Stage:
    """One indexed world; each example lays its target out afresh in the same places."""

    def __init__(self, tmp_path: Path) -> None:
        self.world = make_world(tmp_path)
        write_skill(self.world.cwd / ".claude" / "skills", "pdf")
        assert self.world.run("reindex").exit_code == 0
        self.outside = tmp_path / "outside"  # beside the home: out of every command's folder
        self.aside = self.world.cwd / "aside"
        umask = os.umask(0)
        os.umask(umask)
        self.new_mode = 0o666 & ~umask

    def reset(self) -> None:
        cwd = self.world.cwd
        for path in (self.outside, self.aside, cwd / "given", cwd / ".vscode"):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists():
                shutil.rmtree(path)
        for name in ("skills-lock.json", ".mcp.json"):
            (cwd / name).unlink(missing_ok=True)
        self.outside.mkdir()
        self.aside.mkdir()

    def lay_out(self, command: Command, parent: str, target: str,
                mode: int) -> tuple[Path, str, str]:
        """Make the target's folder and the target as drawn: the path the command writes, and
        the folder and target as they came out (a folder that cannot hold one has none)."""
        default = command.default(self.world) if command.default else None
        path = default or self.world.cwd / "given" / "target.json"
        if path.parent == self.world.cwd:
            parent = "dir"
        else:
            folder = {"dir": None, "missing": None, "link-dir-inside": self.aside / "d",
                      "link-dir-outside": self.outside / "d",
                      "dangling": self.outside / "gone"}[parent]
            if folder is not None and parent != "dangling":
                folder.mkdir()
            if folder is not None:
                path.parent.symlink_to(folder)
            elif parent == "dir":
                path.parent.mkdir()
        if not path.parent.exists():
            return path, parent, "absent"
        if target == "file":
            path.write_text(command.old)
            path.chmod(mode)
        elif target != "absent":
            aims = {"link-file-inside": self.aside / "f", "link-file-outside": self.outside / "f",
                    "dangling-inside": self.aside / "none", "dangling-outside":
                    self.outside / ".bash_profile", "link-dir": self.outside,
                    "chain-file": self.aside / "c1", "chain-dangling": self.aside / "c2",
                    "loop": path}
            aim = aims[target]
            if target in ("link-file-inside", "link-file-outside"):
                aim.write_text(command.old)
                aim.chmod(mode)
            elif target == "chain-file":
                (self.outside / "f").write_text(command.old)
                (self.outside / "f").chmod(mode)
                aim.symlink_to(self.outside / "f")
            elif target == "chain-dangling":
                aim.symlink_to(self.outside / "none")
            elif target == "loop":
                (self.aside / "l").symlink_to(path)
                aim = self.aside / "l"
            path.symlink_to(aim)
        return path, parent, target


def expected_refusal(command: Command, parent: str, target: str, mode: int) -> bool:
    named = command.default is None
    link = target not in ("absent", "file")
    if parent == "dangling":
        return True
    if parent == "link-dir-outside" and not named:
        return True
    if link and (not command.follows_named_links or target in (
            "dangling-inside", "dangling-outside", "link-dir", "chain-dangling", "loop")):
        return True
    if command.old == OLD_TOKENS:  # the token file's folder is never made for it
        return parent == "missing" or (target != "absent" and bool(mode & 0o022))
    return False


def check(stage: Stage, name: str, parent: str, target: str, mode: int) -> str:
    """Run the command on the target as drawn; assert it refused and touched nothing, or wrote
    one regular file whole, beside what it replaced, with the mode the rules give."""
    command = COMMANDS[name]
    stage.reset()
    path, parent, target = stage.lay_out(command, parent, target, mode)
    root = stage.world.tmp
    before = snapshot(root)
    final = Path(os.path.realpath(path))
    old = before.get(str(final.relative_to(root))) if final.is_relative_to(root) else None
    result = stage.world.run(*command.args(path))
    after = snapshot(root)
    assert "Traceback" not in result.output and "internal error" not in result.output
    if result.exit_code != 0:
        assert result.exit_code in (EXIT_REFUSED, 2), result.output
        assert result.stderr.count("\n") == 1, result.stderr
        assert after == before
        assert expected_refusal(command, parent, target, mode), result.output
        return "refused"
    assert not expected_refusal(command, parent, target, mode), (name, parent, target)
    key = str(final.relative_to(root))
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    made = {k for k in changed - {key} if k not in before and after[k].kind == "dir"
            and final.is_relative_to(root / k)}
    assert changed - made == {key}, (changed, key)
    entry = after[key]
    assert entry.kind == "file"
    if command.default is not None:
        assert final.is_relative_to(os.path.realpath(stage.world.cwd))
    if command.private:
        assert entry.mode == 0o600
    else:
        assert entry.mode == (old.mode if old else stage.new_mode)
    if old is not None:
        assert entry.inode != old.inode  # renamed over, never written in place
    assert str(final) in result.output or name == "serve token add"
    return "written"


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    return Stage(tmp_path_factory.mktemp("writes"))


EXAMPLES = int(os.environ.get("SKILLINDEX_WRITE_EXAMPLES", "60"))
CLASSES: Counter[str] = Counter()


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(COMMANDS)), parent=st.sampled_from(PARENTS),
       target=st.sampled_from(TARGETS), mode=st.sampled_from(MODES))
def test_every_write_target_is_refused_or_written_whole(stage: Stage, name: str, parent: str,
                                                         target: str, mode: int) -> None:
    outcome = check(stage, name, parent, target, mode)
    event(f"{name}: {outcome}")
    CLASSES[f"{name} | {outcome}"] += 1
    if os.environ.get("SKILLINDEX_WRITE_CLASSES"):
        with open(os.environ["SKILLINDEX_WRITE_CLASSES"], "w", encoding="utf-8") as out:
            out.writelines(f"{count}\t{key}\n" for key, count in sorted(CLASSES.items()))


@pytest.mark.parametrize("target", ["absent", "file", "link-file-outside", "dangling-outside"])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_writes_whole_or_refuses_a_planted_link(stage: Stage, name: str,
                                                             target: str) -> None:
    outcome = check(stage, name, "dir", target, 0o640)
    links_followed = COMMANDS[name].follows_named_links and target == "link-file-outside"
    assert outcome == ("written" if target in ("absent", "file") or links_followed
                       else "refused")
