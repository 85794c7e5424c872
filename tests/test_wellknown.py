"""`publish wellknown`: a static discovery index (v0.2.0) of the catalog that validates against
the format's schema, is the same bytes every time, and indexes back to the same skills."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from skillindex.api import SkillIndex
from skillindex.cli import cli
from skillindex.config import Environment, RootConfig, Settings
from skillindex.inputs import load_json
from skillindex.model import Validation
from tests.conftest import root_settings, write_skill
from tests.publisher import serving

# The v0.2.0 discovery index as its specification defines it (fields, types, name grammar,
# digest form), written out here so the test does not depend on fetching it.
SCHEMA_V02 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["$schema", "skills"],
    "properties": {
        "$schema": {"const": "https://schemas.agentskills.io/discovery/0.2.0/schema.json"},
        "skills": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "type", "description", "url", "digest"],
                "properties": {
                    "name": {"type": "string", "maxLength": 64,
                             "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
                    "type": {"enum": ["skill-md", "archive"]},
                    "description": {"type": "string", "maxLength": 1024},
                    "url": {"type": "string", "minLength": 1},
                    "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                },
            },
        },
    },
}


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


def catalog(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "alpha", description="Formats alpha reports.")
    beta = write_skill(root, "beta", description="Builds beta bundles.")
    (beta / "references").mkdir()
    (beta / "references" / "guide.md").write_text("# Guide\n")
    (beta / "scripts").mkdir()
    script = beta / "scripts" / "run.sh"
    script.write_text("#!/bin/sh\necho run\n")
    script.chmod(0o755)
    write_skill(root, "Not_A_Web_Name", name="Not_A_Web_Name", description="Odd name.")
    return root


def site_files(site: Path) -> dict[str, bytes]:
    return {"/" + str(path.relative_to(site)): path.read_bytes()
            for path in sorted(site.rglob("*")) if path.is_file()}


def test_the_published_index_validates_is_deterministic_and_round_trips(
        tmp_path: Path, env: Environment, db_url: str) -> None:
    root = catalog(tmp_path)
    index = SkillIndex.open(root_settings(root, validation=Validation.LENIENT), db=db_url, env=env)
    index.reindex()
    written, published = index.publish_wellknown(tmp_path / "site")
    index.publish_wellknown(tmp_path / "site2")
    document = load_json(written.read_text(), what="published index")
    jsonschema.validate(document, SCHEMA_V02)
    assert [(e["name"], e["type"]) for e in document["skills"]] == [
        ("alpha", "skill-md"), ("beta", "archive")]
    assert {p.name: p.reason for p in published}["Not_A_Web_Name"] is not None
    assert site_files(tmp_path / "site") == site_files(tmp_path / "site2")
    for entry in document["skills"]:
        data = (written.parent / entry["url"]).read_bytes()
        assert entry["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    index.close()

    with serving() as publisher:
        publisher.files = site_files(tmp_path / "site")
        other = SkillIndex.open(Settings(presets=False, roots=(
            RootConfig(path="", url=publisher.url),)), db=str(tmp_path / "other.sqlite"),
            env=env)
        other.reindex()
        assert sorted(w.name for w in other.winners()) == ["alpha", "beta"]
        for uri in ["beta/references/guide.md", "beta/scripts/run.sh", "alpha/SKILL.md"]:
            assert other.read(f"skill://{uri}").data == (root / uri).read_bytes()
        assert os.stat(other.read("skill://beta/scripts/run.sh").path).st_mode & 0o111
        other.close()


def test_publish_refuses_a_file_changed_since_the_last_reindex(
        tmp_path: Path, env: Environment, db_url: str) -> None:
    root = catalog(tmp_path)
    index = SkillIndex.open(root_settings(root), db=db_url, env=env)
    index.reindex()
    (root / "alpha" / "SKILL.md").write_text("---\nname: alpha\ndescription: x\n---\nevil\n")
    _, published = index.publish_wellknown(tmp_path / "site")
    reasons = {p.name: p.reason for p in published}
    assert "changed since the last reindex" in str(reasons["alpha"])
    assert not (tmp_path / "site/.well-known/agent-skills/alpha").exists()
    index.close()


def test_the_command_prints_what_it_wrote(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import isolate_cli

    root = catalog(tmp_path)
    isolate_cli(tmp_path, monkeypatch, root)
    runner = CliRunner()
    runner.invoke(cli, ["reindex"], catch_exceptions=False)
    result = runner.invoke(cli, ["publish", "wellknown", str(tmp_path / "site")],
                           catch_exceptions=False)
    assert result.exit_code == 0
    assert f"wrote {tmp_path / 'site/.well-known/agent-skills/index.json'}: 2 skills" \
        in result.output
    as_json = runner.invoke(cli, ["--json", "publish", "wellknown", str(tmp_path / "site")],
                            catch_exceptions=False)
    assert '"type": "archive"' in as_json.output
