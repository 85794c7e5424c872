"""Lock files: the `skills` CLI's folder hash and format, checked against node where it is."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillindex.errors import ConfigError
from skillindex.model import Validation
from skillindex.query import lockfile
from skillindex.query.lockfile import LockEntry
from tests.conftest import OpenIndex, in_ci, write_skill
from tests.skilltrees import make_world

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


@pytest.fixture
def icu() -> None:
    """ICU's collator (the `icu` extra, in `test` too): skipped without it, except under CI,
    where a venv without it is the mistake."""
    if importlib.util.find_spec("icu") is None:
        reason = "PyICU is not installed (pip install -e '.[test]' brings pyicu-wheels)"
        if in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)

# The `skills` CLI's hash, as its source computes it: readdir recursively (regular files only,
# `.git` and `node_modules` skipped), sort by localeCompare, sha256 over path then bytes.
CLI_HASH_JS = """
const {readdir, readFile} = require('fs/promises');
const {join, relative} = require('path');
const {createHash} = require('crypto');
async function collect(base, dir, out) {
  for (const entry of await readdir(dir, {withFileTypes: true})) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === '.git' || entry.name === 'node_modules') continue;
      await collect(base, full, out);
    } else if (entry.isFile()) {
      out.push({relativePath: relative(base, full).split('\\\\').join('/'),
                content: await readFile(full)});
    }
  }
}
(async () => {
  const files = [];
  await collect(process.argv[1], process.argv[1], files);
  files.sort((a, b) => a.relativePath.localeCompare(b.relativePath));
  const hash = createHash('sha256');
  for (const file of files) { hash.update(file.relativePath); hash.update(file.content); }
  console.log(hash.digest('hex'));
})();
"""


def node(script: str, *args: str, stdin: str = "") -> str:
    assert NODE is not None
    return subprocess.run([NODE, "-e", script, *args], input=stdin, capture_output=True,
                          text=True, check=True).stdout


def awkward_skill(root: Path) -> Path:
    """A skill whose file names exercise every ordering rule and every skipped kind of entry."""
    skill = write_skill(root, "awkward")
    for rel in ("Scripts/Run.sh", "scripts/run.sh", "scripts/run-2.sh", "scripts/run_2.sh",
                "a.md", "A.md", "a/b.md", "ab.md", ".hidden", "_private.txt", "10.txt", "9.txt",
                "références/é.md", "references/e.md", "Ärger.md", "über/x", ".git/HEAD",
                "node_modules/x/index.js", "deep/.git/config", "deep/keep.txt"):
        path = skill / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{rel}\n".encode())
    (skill / "link.md").symlink_to(skill / "a.md")
    (skill / "linked-dir").symlink_to(skill / "deep")
    return skill


def test_folder_files_follow_the_cli_rules(tmp_path: Path) -> None:
    skill = awkward_skill(tmp_path)

    names = [rel for rel, _ in lockfile.folder_files(skill, max_bytes=1 << 20)]

    # Hidden files are kept; .git and node_modules (at any depth) and links are not.
    assert ".hidden" in names
    assert "deep/keep.txt" in names
    assert not [n for n in names if ".git/" in n or "node_modules" in n or "link" in n]
    # Case is the last thing compared: a.md, A.md, then a/b.md ('.' sorts before '/').
    assert names.index("a.md") + 1 == names.index("A.md")
    assert names.index("A.md") + 1 == names.index("a/b.md")


@needs_node
def test_computed_hash_equals_the_cli_algorithm_under_node(tmp_path: Path) -> None:
    skill = awkward_skill(tmp_path)

    ours = lockfile.computed_hash(lockfile.folder_files(skill, max_bytes=1 << 20))

    assert ours == node(CLI_HASH_JS, str(skill)).strip()


SORT_JS = ("let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
           "const a=JSON.parse(s);a.sort((x,y)=>x.localeCompare(y));"
           "console.log(JSON.stringify(a))})")
# For each pair [a, b] the sign of a.localeCompare(b).
COMPARE_JS = ("let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
              "console.log(JSON.stringify(JSON.parse(s).map(([a,b])=>"
              "Math.sign(a.localeCompare(b)))))})")


@needs_node
def test_the_fallback_matches_node_localecompare_on_latin_paths() -> None:
    alphabet = (" _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789"
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéÉäÄñçÅøßœæÆØ")
    rng = random.Random(2640)
    words = sorted({"".join(rng.choice(alphabet if rng.random() < 0.3 else "abAB/.-_é")
                            for _ in range(rng.randint(1, 10))) for _ in range(4000)})

    expected = json.loads(node(SORT_JS, stdin=json.dumps(words)))

    assert sorted(words, key=lockfile.fallback_key) == expected


def _random_char(rng: random.Random) -> str:
    """A character a file name may hold, from the ranges real names draw on and from anywhere
    (assigned in this Python's Unicode, so in node's ICU too)."""
    while True:
        low, high = rng.choice([(0x20, 0x7E), (0x20, 0x7E), (0xA0, 0x24F), (0x2000, 0x2BFF),
                                (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x300, 0x36F),
                                (0x1F300, 0x1FAFF), (0x80, 0x10FFFF)])
        char = chr(rng.randint(low, high))
        if char not in "/\x00" and unicodedata.category(char) not in ("Cn", "Cs", "Co"):
            return char


def random_names(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < count:
        chars = [_random_char(rng) for _ in range(rng.randint(1, 12))]
        if rng.random() < 0.3:
            chars.insert(rng.randrange(len(chars) + 1), "/")
        names.add("".join(chars))
    return sorted(names)


@needs_node
def test_collation_equals_node_localecompare_on_random_unicode_names(icu: None) -> None:
    names = random_names(24, 5000)
    rng = random.Random(24)
    pairs = [(rng.choice(names), rng.choice(names)) for _ in range(10_000)]
    pairs += [(a, a[:rng.randint(0, len(a))] + rng.choice(names))  # sharing a start
              for a in (rng.choice(names) for _ in range(5_000))]
    key = lockfile.collation_key()

    signs = json.loads(node(COMPARE_JS, stdin=json.dumps(pairs)))
    ours = [(key(a) > key(b)) - (key(a) < key(b)) for a, b in pairs]

    assert [p for p, s, o in zip(pairs, signs, ours, strict=True) if s != o] == []
    assert sorted(names, key=key) == json.loads(node(SORT_JS, stdin=json.dumps(names)))


# Symbols, kana, CJK, emoji, a ligature, and names the collation finds equal (NFC and NFD,
# a zero-width space), whose order is then the CLI's walk's.
UNICODE_FILES = ("€-prices.md", "prices.md", "アプリ.md", "あぷり.md", "app.md", "™.md",
                 "10€.md", "§ 3.md", "漢字/説明.md", "😀.md", "ﬁle.md", "file.md",
                 "é.md", "e\u0301.md", "ab.md", "a\u200bb.md", "x/€.md", "x/y.md")


@needs_node
def test_computed_hash_equals_the_cli_for_symbols_and_kana(tmp_path: Path, icu: None) -> None:
    skill = write_skill(tmp_path, "unicode")
    for rel in UNICODE_FILES:
        path = skill / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{rel}\n".encode())

    ours = lockfile.computed_hash(lockfile.folder_files(skill, max_bytes=1 << 20))

    assert ours == node(CLI_HASH_JS, str(skill)).strip()


@needs_node
@pytest.mark.parametrize("lang", ["C.UTF-8", "sv_SE.UTF-8", "ja_JP.UTF-8", ""])
def test_the_order_follows_the_locale_as_node_does(tmp_path: Path, lang: str,
                                               icu: None) -> None:
    """`localeCompare` collates in the default locale (Swedish puts ä after z)."""
    names = ["z.md", "ä.md", "a.md", "Z.md", "アプリ.md", "あぷり.md", "漢.md", "字.md"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LC_")} | {"LANG": lang}
    script = ("import json, sys; from skillindex.query import lockfile; "
              "print(json.dumps(sorted(json.load(sys.stdin), key=lockfile.collation_key())))")
    ours = subprocess.run([sys.executable, "-c", script], input=json.dumps(names), env=environ,
                          capture_output=True, text=True, check=True).stdout
    assert NODE is not None
    theirs = subprocess.run([NODE, "-e", SORT_JS], input=json.dumps(names), env=environ,
                            capture_output=True, text=True, check=True).stdout
    assert json.loads(ours) == json.loads(theirs)


@needs_node
def test_rendered_file_is_byte_for_byte_what_the_cli_writes() -> None:
    entries = {name: LockEntry(f"owner/{name}", "github", "ab" * 32)
               for name in ("pdf", "Zeta", "älpha", "b-2", "b_1", "émoji-😀")}
    write_js = ("let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
                "const skills=JSON.parse(s);const sorted={};"
                "for(const k of Object.keys(skills).sort()) sorted[k]=skills[k];"
                "process.stdout.write(JSON.stringify({version:1,skills:sorted},null,2)+'\\n')})")

    expected = node(write_js, stdin=json.dumps({k: v.as_json() for k, v in entries.items()}))

    assert lockfile.render(entries) == expected
    assert "".join(lockfile.chunks(entries, per_chunk=2)) == expected  # as the CLI writes it


@pytest.mark.parametrize(("text", "problem"), [
    ("{", "not a lock file"),
    ("[]", 'no "skills" object'),
    ('{"version": 2, "skills": {}}', "lock file version 2"),
    ('{"version": 1, "skills": {"pdf": {"source": "x"}}}', "no computedHash"),
], ids=["broken-json", "not-an-object", "newer-version", "entry-without-hash"])
def test_a_broken_lock_file_is_a_clear_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "skills-lock.json"
    path.write_text(text)

    with pytest.raises(ConfigError, match=problem):
        lockfile.read(path)


def test_lock_then_verify_reports_added_removed_and_changed(tmp_path: Path,
                                                            open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    for name in ("keep", "edit", "gone"):
        write_skill(root, name)
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()
    lock_path = tmp_path / "skills-lock.json"
    lock_path.write_text(lockfile.render(index.lock()))
    assert index.verify_lock(lock_path) == []

    (root / "edit" / "SKILL.md").write_text("---\nname: edit\ndescription: Edited.\n---\nNew.\n")
    shutil.rmtree(root / "gone")
    write_skill(root, "new")
    index.reindex()

    assert [(d.skill, d.problem) for d in index.verify_lock(lock_path)] == [
        ("edit", "changed"), ("gone", "removed"), ("new", "added")]


def test_lock_keeps_the_source_of_skills_it_already_lists(tmp_path: Path,
                                                          open_index: OpenIndex) -> None:
    root = tmp_path / "skills"
    skill = write_skill(root, "pdf")
    write_skill(root, "local-one")
    index = open_index(root, validation=Validation.LENIENT)
    index.reindex()

    entries = index.lock({"pdf": LockEntry("anthropics/skills", "github", "0" * 64)})

    assert entries["pdf"].source == "anthropics/skills"
    assert entries["pdf"].source_type == "github"
    assert entries["pdf"].computed_hash == lockfile.computed_hash(
        lockfile.folder_files(skill, max_bytes=1 << 20))
    assert entries["local-one"].source_type == "local"


def test_cli_lock_and_verify_lock(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    skills = world.cwd / ".claude" / "skills"
    write_skill(skills, "pdf")
    assert world.run("reindex").exit_code == 0

    written = world.run("lock")
    lock_path = world.cwd / "skills-lock.json"
    assert written.exit_code == 0, written.output
    assert json.loads(lock_path.read_text())["skills"]["pdf"]["sourceType"] == "local"
    assert world.run("verify", "--lock", str(lock_path)).exit_code == 0

    (skills / "pdf" / "notes.md").write_text("added later\n")
    os.utime(skills / "pdf")
    world.run("reindex")
    drift = world.run("--json", "verify", "--lock", str(lock_path))

    assert drift.exit_code == 1
    assert json.loads(drift.output)["lock"] == [
        {"skill": "pdf", "problem": "changed", "locked": json.loads(lock_path.read_text())
         ["skills"]["pdf"]["computedHash"], "current": lockfile.computed_hash(
             lockfile.folder_files(skills / "pdf", max_bytes=1 << 20)), "reason": None}]
    assert world.run("verify", "--lock", str(tmp_path / "nope.json")).exit_code == 2


@pytest.mark.parametrize("spoiler", ["not-utf8", "hidden-over-the-limit"])
def test_one_skill_that_cannot_be_hashed_stops_neither_lock_nor_verify(tmp_path: Path,
                                                                        spoiler: str) -> None:
    world = make_world(tmp_path)
    skills = world.cwd / ".claude" / "skills"
    write_skill(skills, "good")
    odd = write_skill(skills, "odd")
    if spoiler == "not-utf8":
        with open(os.fsencode(odd) + b"/caf\xe9.txt", "wb") as handle:
            handle.write(b"bytes\n")
    config = "[skills]\nmax_skill_bytes = 2048\n" if spoiler != "not-utf8" else ""
    assert world.run("reindex", config=config).exit_code == 0
    if spoiler != "not-utf8":  # grown past the limit since the reindex
        (odd / ".cache").mkdir()
        (odd / ".cache" / "blob").write_bytes(b"x" * 4096)
    assert "odd" in world.run("list", config=config).stdout  # else there is nothing to lock

    written = world.run("lock", config=config)
    lock_path = world.cwd / "skills-lock.json"
    assert written.exit_code == 1
    assert written.stderr.startswith("skillindex: error: skill odd is not in the lock file: ")
    assert written.stderr.count("\n") == 1 and "Traceback" not in written.output
    assert list(json.loads(lock_path.read_text())["skills"]) == ["good"]

    checked = world.run("--json", "verify", "--lock", str(lock_path), config=config)
    assert checked.exit_code == 1
    [drift] = json.loads(checked.stdout)["lock"]
    assert (drift["skill"], drift["problem"], drift["locked"]) == ("odd", "unhashed", None)
    assert drift["reason"]
    text = world.run("verify", "--lock", str(lock_path), config=config)
    assert text.exit_code == 1 and "odd: not hashed: " in text.stdout


_TEXT = st.text(st.characters(codec="utf-8"), max_size=8) | st.text("ab\"\\\n/é ", max_size=8)


@given(st.dictionaries(_TEXT, st.tuples(_TEXT, _TEXT, _TEXT), max_size=6))
def test_the_lock_text_is_what_json_dumps_writes(raw: dict[str, tuple[str, str, str]]) -> None:
    # render writes an entry at a time; the file must stay byte for byte the CLI's, which
    # is JSON.stringify(document, null, 2), as json.dumps(indent=2) writes it.
    entries = {name: LockEntry(*fields) for name, fields in raw.items()}
    ordered = sorted(entries, key=lambda name: name.encode("utf-16-be", "surrogatepass"))
    document = {"version": 1, "skills": {name: entries[name].as_json() for name in ordered}}
    expected = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    assert lockfile.render(entries) == expected
    assert "".join(lockfile.chunks(entries, per_chunk=2)) == expected  # as the CLI writes it


def test_a_dangling_lock_file_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    # The repository ships skills-lock.json as a link to the user's shell profile, which does
    # not exist yet, and a skill whose name is a command substitution.
    world = make_world(tmp_path)
    write_skill(world.cwd / ".claude" / "skills", "pdf")
    write_skill(world.cwd / ".claude" / "skills", "pwn",
                frontmatter='name: "$(touch PWNED)"\ndescription: x\n')
    profile = world.home / ".bash_profile"
    link = world.cwd / "skills-lock.json"
    link.symlink_to(os.path.relpath(profile, world.cwd))
    assert world.run("reindex").exit_code == 0
    before = sorted(tmp_path.rglob("*"))
    for args in (("lock",), ("lock", "--output", str(link)), ("--json", "lock")):
        result = world.run(*args)
        assert result.exit_code == 4, result.output
        assert "dangling symbolic link" in result.stderr and "Traceback" not in result.output
        assert not profile.exists() and link.is_symlink()
        assert sorted(tmp_path.rglob("*")) == before


OLD_LOCK = '{\n  "version": 1,\n  "skills": {}\n}\n'


def test_a_lock_file_link_is_written_through_only_when_named(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    write_skill(world.cwd / ".claude" / "skills", "pdf")
    kept = world.repo / "locks" / "skills.json"
    kept.parent.mkdir()
    kept.write_text(OLD_LOCK, encoding="utf-8")
    kept.chmod(0o640)
    link = world.cwd / "skills-lock.json"
    link.symlink_to(kept)
    assert world.run("reindex").exit_code == 0
    refused = world.run("lock")
    assert refused.exit_code == 4 and "symbolic link" in refused.stderr
    assert kept.read_text(encoding="utf-8") == OLD_LOCK
    written = world.run("--json", "lock", "--output", str(link))
    assert written.exit_code == 0, written.output
    assert json.loads(written.stdout)["path"] == str(kept.resolve())
    assert link.is_symlink() and list(json.loads(kept.read_text())["skills"]) == ["pdf"]
    assert kept.stat().st_mode & 0o777 == 0o640
