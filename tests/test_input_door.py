"""Every supplied file is parsed, and every settings glob compiled, by skillindex/inputs.py:
a walk over the package's syntax trees finds no other parser of JSON, TOML or YAML text and
no other glob matcher, except where the text is the store's own or has bounds of its own."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import skillindex

PACKAGE = Path(skillindex.__file__).parent
DOOR = "inputs.py"

# Modules that may parse JSON text, and why that text is not a supplied file.
JSON_TEXT_OF_THEIR_OWN = {
    "query/listing.py": "a JSON column the index wrote",
    "query/lookup.py": "a JSON column the index wrote",
    "query/resolve.py": "a stored collision, JSON the index wrote",
    "query/catalog.py": "the catalog cache, JSON the index wrote",
    "query/advisories.py": "`loads`: the advisories the store keeps; feeds go through inputs",
    "store/usage.py": "a JSON column the index wrote",
    "store/resolved.py": "a JSON column the index wrote",
    "store/reporting.py": "a JSON column the index wrote",
    "index/judge.py": "frontmatter the index just encoded itself",
    "index/risk.py": "a risk record the index wrote",
    "index/dialect.py": "`HostFields.from_json`: a JSON column the index wrote",
    "index/signing.py": "`Signature.from_json`: a JSON column the index wrote",
    "cli/index.py": "`explain --json`: a signature record the index itself encodes",
    "extras.py": "the installer's direct_url.json of skillindex's own distribution",
    "serve/gates.py": "an HTTP body, bounded in size and depth by the request gates before it",
    "serve/hosts.py": "`raw_decode` of members of text inputs.load_json already parsed whole",
}
# Modules that may import PyYAML, and why.
YAML_OF_THEIR_OWN = {
    "index/frontmatter.py": "the SKILL.md frontmatter parser: bounded in size, depth, aliases "
                            "and parser work (inputs.load_yaml goes through it)",
}
PARSERS = {("json", "loads"), ("json", "load"), ("tomllib", "loads"), ("tomllib", "load"),
           ("json", "JSONDecoder"), ("json", "decoder")}


@functools.cache
def modules() -> dict[str, ast.Module]:
    return {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


def imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def parser_uses(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id, node.attr) in PARSERS:
            found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in ("json", "tomllib",
                                                                  "json.decoder"):
            found.append(f"from {node.module} import ... (line {node.lineno})")
    return found


def test_the_door_walk_sees_the_package() -> None:
    walked = modules()
    assert DOOR in walked and "config.py" in walked and "serve/hosts.py" in walked
    assert parser_uses(walked[DOOR])  # the door itself parses: the walk would see others


def test_no_module_but_the_door_parses_toml() -> None:
    offenders = [name for name, tree in modules().items()
                 if name != DOOR and "tomllib" in imported(tree)]
    assert not offenders, "read TOML through skillindex.inputs: " + ", ".join(offenders)


def test_no_module_but_the_door_and_the_frontmatter_parser_imports_yaml() -> None:
    offenders = [name for name, tree in modules().items()
                 if name != DOOR and name not in YAML_OF_THEIR_OWN and "yaml" in imported(tree)]
    assert not offenders, "read YAML through skillindex.inputs: " + ", ".join(offenders)


def test_json_text_is_parsed_by_the_door_or_is_the_index_s_own() -> None:
    offenders = {name: uses for name, tree in modules().items()
                 if name != DOOR and name not in JSON_TEXT_OF_THEIR_OWN
                 and (uses := [u for u in parser_uses(tree) if not u.startswith("tomllib")])}
    assert not offenders, f"parse supplied JSON with skillindex.inputs: {offenders}"


def test_no_module_parses_a_file_object_as_json() -> None:
    offenders = [f"{name}: {use}" for name, tree in modules().items()
                 for use in parser_uses(tree) if use.startswith(("json.load ", "tomllib.load "))]
    assert not offenders, offenders


def test_the_allowed_exceptions_still_need_their_exception() -> None:
    walked = modules()
    stale = [name for name in JSON_TEXT_OF_THEIR_OWN
             if name not in walked or not parser_uses(walked[name])]
    stale += [name for name in YAML_OF_THEIR_OWN
              if name not in walked or "yaml" not in imported(walked[name])]
    assert not stale, f"no longer parse there; drop them from the list: {stale}"


def test_no_module_matches_globs_but_the_door() -> None:
    offenders = [name for name, tree in modules().items()
                 if "fnmatch" in imported(tree)
                 or any(isinstance(node, ast.Attribute) and node.attr == "translate"
                        and isinstance(node.value, ast.Name) and node.value.id == "fnmatch"
                        for node in ast.walk(tree))]
    assert not offenders, "compile globs with skillindex.inputs.compile_glob: " + \
        ", ".join(offenders)
