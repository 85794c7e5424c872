"""The house's imports: every import in skillindex/, migrations/ and scripts/ points to its own
layer or one below it, in the order docs/architecture.md gives, and no modules import each
other in a circle. Read from the source with `ast`, function-level imports included (a lazy
import is still a dependency)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The one import that points up on purpose: `skillindex/__init__.py` loads SkillIndex when it
# is first asked for, so `import skillindex` pulls in no SQLAlchemy.
ALLOWED_UP = {("skillindex", "skillindex.api"),
              # A supplied YAML file is parsed by the frontmatter's bounded loader, imported
              # where such a file is read: one YAML parser with one set of bounds.
              ("skillindex.inputs", "skillindex.index.frontmatter")}


def _modules() -> dict[str, Path]:
    """Every module by its dotted name (migrations/ ships as skillindex.migrations)."""
    found = {}
    for top, package in (("skillindex", "skillindex"), ("migrations", "skillindex.migrations"),
                         ("scripts", "scripts")):
        for path in sorted((REPO / top).rglob("*.py")):
            parts = [package, *path.relative_to(REPO / top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _targets(name: str, path: Path, node: ast.AST) -> Iterator[str]:
    """The modules of the house one import statement of `name` (at `path`) names."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parent = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join([*parent, *([base] if base else [])])
        # `from skillindex import text` imports the module skillindex.text.
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                   for alias in node.names]
    for named in targets:
        found = named
        while found and found not in MODULES:
            found = found.rpartition(".")[0]
        if found and found != name:
            yield found


def _imported(name: str, path: Path) -> dict[str, int]:
    """The modules of the house `name` imports anywhere, with the first line importing each."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        for target in _targets(name, path, node):
            found.setdefault(target, getattr(node, "lineno", 0))
    return found


GRAPH = {name: _imported(name, path) for name, path in MODULES.items()}


def _layers() -> list[list[str]]:
    """The layers of docs/architecture.md, lowest first: the block under "## Layers", one
    layer a line, its members before the first run of two spaces (`store/` is a package)."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1]
    block = section.split("```", 2)[1]
    layers = []
    for line in block.splitlines()[1:]:
        if line.strip() and not line.startswith(" "):
            names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            layers.append([name.strip() for name in names.split(",")])
    return layers


def _rank(module: str, layers: list[list[str]]) -> int:
    for rank, members in enumerate(layers):
        for member in members:
            prefix = member.rstrip("/").replace("/", ".")
            full = prefix if prefix == "scripts" or prefix.startswith("skillindex") else (
                f"skillindex.{prefix}")
            if member.endswith("/") and (module == full or module.startswith(full + ".")):
                return rank
            if module == full:
                return rank
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_every_module_has_a_layer() -> None:
    layers = _layers()
    assert len(layers) >= 8
    for module in MODULES:
        _rank(module, layers)


def test_no_import_points_up() -> None:
    layers = _layers()
    upward = [f"{MODULES[module].relative_to(REPO)}:{line}: {module} imports {target}"
              for module, targets in GRAPH.items() for target, line in targets.items()
              if _rank(target, layers) > _rank(module, layers)
              and (module, target) not in ALLOWED_UP]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    # Depth-first search; a module met again while it is still open closes a circle.
    circles: list[list[str]] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in GRAPH[module]:
            if (module, target) in ALLOWED_UP:
                continue
            if state.get(target) == "open":
                circles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert circles == []


def test_the_fast_path_and_the_use_cases_it_shares_import_no_sqlalchemy() -> None:
    # Besides the run-time check of the one-shot commands (tests/test_oneshot.py): at module
    # level, outside `if TYPE_CHECKING:`, in every module the sqlite3 path loads.
    shared = ["skillindex.query.oneshot", "skillindex.query.quick"]
    seen: set[str] = set()
    while shared:
        module = shared.pop()
        if module in seen or not module.startswith("skillindex"):
            continue
        seen.add(module)
        shared.extend(t for t in _runtime_imports(module) if t in MODULES)
    heavy = {module: sorted(_external(module) & {"sqlalchemy", "alembic"}) for module in seen}
    assert {module: found for module, found in heavy.items() if found} == {}


def _top_level(module: str) -> Iterator[ast.stmt]:
    """The statements run when `module` is imported (not those under `if TYPE_CHECKING:`, nor
    function bodies: a lazy import is loaded by the command that needs it)."""
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            continue
        yield node


def _runtime_imports(module: str) -> set[str]:
    return {target for node in _top_level(module)
            for target in _targets(module, MODULES[module], node)}


def _external(module: str) -> set[str]:
    found: set[str] = set()
    for node in _top_level(module):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("use_case", ["read", "command"])
def test_a_read_stays_in_its_use_case_and_below(use_case: str) -> None:
    # What the read and the /skill: message import, at any depth, is never the facade.
    module = f"skillindex.query.{use_case}"
    reached: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current not in reached:
            reached.add(current)
            todo.extend(GRAPH[current])
    assert "skillindex.api" not in reached
    assert not any(name.startswith(("skillindex.cli", "skillindex.serve")) for name in reached)
