"""URL roots: a publisher's `.well-known` index fetched, verified and indexed from its cache,
with the last good copy kept on every kind of failure (a real HTTP server on loopback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from skillindex.errors import SkillIndexError
from skillindex.index import remote
from tests.publisher import (
    INDEX,
    Publisher,
    serving,
    skill_md,
    tar_gz,
    zip_bytes,
)


@pytest.fixture
def db_backend() -> str:
    return "sqlite"


@pytest.fixture
def site() -> Iterator[Publisher]:
    with serving() as publisher:
        yield publisher


def settings(site: Publisher, **options: object) -> Settings:
    return Settings(presets=False, roots=(RootConfig(path="", url=site.url, **options),))  # type: ignore[arg-type]


def opened(site: Publisher, env: Environment, db_url: str, **options: object) -> SkillIndex:
    return SkillIndex.open(settings(site, **options), db=db_url, env=env)


def names(index: SkillIndex) -> list[str]:
    return sorted(winner.name for winner in index.winners())


def three(site: Publisher) -> list[dict[str, str]]:
    return [
        site.add_skill_md("alpha", skill_md("alpha", "Formats alpha reports.")),
        site.add_archive("beta", tar_gz({
            "SKILL.md": skill_md("beta", "Builds beta bundles."),
            "references/guide.md": b"# Guide\n",
            "scripts/run.sh": b"#!/bin/sh\necho run\n"})),
        site.add_archive("gamma", zip_bytes({
            "SKILL.md": skill_md("gamma", "Checks gamma files."),
            "notes.txt": b"notes\n"}), suffix=".zip"),
    ]


def test_skill_md_and_archive_entries_are_indexed_read_and_carry_provenance(
        site: Publisher, env: Environment, db_url: str) -> None:
    entries = three(site)
    site.publish(entries)
    index = opened(site, env, db_url)
    report = index.reindex()
    assert names(index) == ["alpha", "beta", "gamma"]
    assert report.fetches[0]["downloads"] == 3
    assert index.winner("beta").candidate.description == "Builds beta bundles."
    assert index.read("skill://beta").data == b"# Body\n"
    assert index.read("skill://beta/references/guide.md").data == b"# Guide\n"
    assert index.read("skill://gamma/notes.txt").data == b"notes\n"
    script = index.read("skill://beta/scripts/run.sh")
    assert os.stat(script.path).st_mode & 0o111  # the execute bit came with the archive
    spec = index.plan.roots[0]
    state = remote.status(spec)
    assert state is not None and state.note() is None
    assert state.provenance("beta") == {"url": f"{site.url}/.well-known/agent-skills/beta.tar.gz",
                                        "digest": entries[1]["digest"]}
    index.close()


def test_an_unchanged_index_answers_304_and_nothing_is_downloaded_again(
        site: Publisher, env: Environment, db_url: str) -> None:
    site.publish(three(site))
    index = opened(site, env, db_url)
    index.reindex()
    site.requests.clear()
    report = index.reindex()
    assert site.requests == [(INDEX, site.requests[0][1])] and site.requests[0][1]
    assert report.fetches[0]["downloads"] == 0 and report.fetches[0]["requests"] == 1
    assert names(index) == ["alpha", "beta", "gamma"]
    index.close()


def test_cache_control_max_age_skips_the_request_while_fresh(
        site: Publisher, env: Environment, db_url: str) -> None:
    site.cache_control = "max-age=600"
    site.publish(three(site))
    index = opened(site, env, db_url)
    index.reindex()
    site.requests.clear()
    report = index.reindex()
    assert site.requests == [] and report.fetches[0]["requests"] == 0
    index.close()


def test_a_changed_digest_is_fetched_again_and_a_removed_entry_disappears(
        site: Publisher, env: Environment, db_url: str) -> None:
    entries = three(site)
    site.publish(entries)
    index = opened(site, env, db_url)
    index.reindex()
    entries[0] = site.add_skill_md("alpha", skill_md("alpha", "Formats alpha reports, v2."))
    site.publish(entries[:2])
    site.requests.clear()
    report = index.reindex()
    assert site.downloads() == 1 and report.fetches[0]["removed"] == 1
    assert names(index) == ["alpha", "beta"]
    assert index.winner("alpha").candidate.description == "Formats alpha reports, v2."
    index.close()


def _tampered(site: Publisher) -> dict[str, str]:
    entry = site.add_skill_md("alpha", skill_md("alpha", "Formats alpha reports."))
    site.files[entry["url"]] = skill_md("alpha", "Sends your keys away.")
    return entry


def _archive(files: dict[str, bytes], **links: dict[str, str]) -> bytes:
    return tar_gz(files, **links)


UNSAFE: dict[str, Callable[[Publisher], dict[str, str]]] = {
    "digest-mismatch": _tampered,
    "symlink": lambda site: site.add_archive("alpha", _archive(
        {"SKILL.md": skill_md("alpha", "Formats alpha reports.")},
        links={"references/key": "/etc/passwd"})),
    "hardlink": lambda site: site.add_archive("alpha", _archive(
        {"SKILL.md": skill_md("alpha", "Formats alpha reports.")},
        hardlinks={"copy.md": "SKILL.md"})),
    "dotdot": lambda site: site.add_archive("alpha", tar_gz(
        {"SKILL.md": skill_md("alpha", "Formats alpha reports."), "../escape.md": b"x"})),
    "absolute": lambda site: site.add_archive("alpha", tar_gz(
        {"SKILL.md": skill_md("alpha", "Formats alpha reports."), "/tmp/abs.md": b"x"})),
    "too-many-files": lambda site: site.add_archive("alpha", tar_gz(
        {"SKILL.md": skill_md("alpha", "Formats alpha reports."),
         **{f"f{n}.md": b"x" for n in range(5)}})),
    "too-many-bytes": lambda site: site.add_archive("alpha", tar_gz(
        {"SKILL.md": skill_md("alpha", "Formats alpha reports."), "big.bin": b"\0" * 5000})),
    "no-skill-md": lambda site: site.add_archive("alpha", zip_bytes({"README.md": b"x"}),
                                                 suffix=".zip"),
}


@pytest.mark.parametrize("unsafe", sorted(UNSAFE))
def test_an_unsafe_or_tampered_update_is_refused_and_the_last_good_copy_kept(
        site: Publisher, env: Environment, db_url: str, unsafe: str) -> None:
    good = site.add_skill_md("alpha", skill_md("alpha", "Formats alpha reports.",
                                               body="# Good body\n"))
    site.publish([good])
    index = opened(site, env, db_url, max_archive_files=4, max_archive_bytes=1000)
    index.reindex()
    site.publish([UNSAFE[unsafe](site)])
    report = index.reindex()
    failed = report.fetches[0]["failed"]
    assert isinstance(failed, dict) and "alpha" in failed
    assert any(problem.code == "remote-stale" for problem in report.problems)
    assert index.read("skill://alpha").data.endswith(b"# Good body\n")
    state = remote.status(index.plan.roots[0])
    assert state is not None
    note = state.entry_note("alpha")
    assert note is not None and note.startswith("stale since ")
    cache = remote.cache_of(index.plan.roots[0])
    assert not (cache / "tmp").exists()
    assert not Path("/tmp/abs.md").exists() or unsafe != "absolute"
    assert not (cache / "escape.md").exists() and not (cache / "skills" / "escape.md").exists()
    index.close()


def test_a_server_that_is_down_leaves_the_cache_in_force_with_a_stale_note(
        site: Publisher, env: Environment, db_url: str) -> None:
    site.publish(three(site))
    index = opened(site, env, db_url)
    index.reindex()
    site.down = True
    report = index.reindex()
    assert report.fetches[0]["stale"] == f"{site.url}{INDEX} answered 503"
    assert names(index) == ["alpha", "beta", "gamma"]
    assert index.read("skill://alpha").data == b"# Body\n"
    state = remote.status(index.plan.roots[0])
    assert state is not None and state.note() is not None
    index.close()


def test_offline_fetches_nothing_and_read_never_fetches(
        site: Publisher, env: Environment, db_url: str) -> None:
    site.publish(three(site))
    index = opened(site, env, db_url)
    index.reindex()
    site.requests.clear()
    index.reindex(offline=True)
    index.read("skill://alpha")
    index.catalog()
    index.search("alpha reports")
    assert site.requests == []
    index.close()


def test_a_legacy_or_unknown_index_is_refused_not_half_trusted(
        site: Publisher, env: Environment, db_url: str) -> None:
    site.files["/.well-known/skills/index.json"] = (
        b'{"skills": [{"name": "alpha", "description": "d", "files": ["SKILL.md"]}]}')
    site.files["/.well-known/skills/alpha/SKILL.md"] = skill_md("alpha")
    index = opened(site, env, db_url)
    report = index.reindex()
    assert "v0.1.0 index" in str(report.fetches[0]["stale"])
    assert names(index) == []
    site.publish([], extra={"$schema": "https://example.invalid/9.0.0/schema.json"})
    assert "unknown $schema" in str(index.reindex().fetches[0]["stale"])
    index.close()


def test_the_legacy_path_is_read_when_it_holds_a_current_index(
        site: Publisher, env: Environment, db_url: str) -> None:
    site.publish([site.add_skill_md("alpha", skill_md("alpha"))],
                 path="/.well-known/skills/index.json")
    index = opened(site, env, db_url)
    index.reindex()
    assert names(index) == ["alpha"]
    index.close()


@pytest.mark.parametrize("url", ["http://skills.example.com", "ftp://127.0.0.1",
                                 "https://user:pw@example.com", "https://example.com/?q=1"])
def test_settings_refuse_urls_that_are_not_plain_https(tmp_path: Path, env: Environment,
                                                        url: str) -> None:
    from skillindex.config import load_settings

    config = tmp_path / "config.toml"
    config.write_text(f'[[roots]]\nurl = "{url}"\n')
    with pytest.raises(SkillIndexError, match=r"roots\[1\]\.url"):
        load_settings(config, env)


def test_settings_accept_a_url_root_below_every_local_root(tmp_path: Path,
                                                          env: Environment) -> None:
    from skillindex.config import load_settings
    from skillindex.providers import plan_roots

    config = tmp_path / "config.toml"
    config.write_text('[skills]\npresets = false\n[[roots]]\npath = "/srv/local"\n'
                      '[[roots]]\nurl = "https://skills.example.com/"\n')
    loaded = load_settings(config, env)
    local, web = plan_roots(loaded, env).roots
    assert web.remote is not None and web.remote.url == "https://skills.example.com"
    assert web.precedence < local.precedence and web.provider == "url"


def test_a_kill_during_a_fetch_never_leaves_a_partial_skill_indexed(
        site: Publisher, env: Environment, tmp_path: Path) -> None:
    """A child process fetching a large archive is killed (SIGKILL) while it downloads: the
    next offline reindex indexes only whole skills, and the next online one completes."""
    good = site.add_skill_md("alpha", skill_md("alpha", "Formats alpha reports."))
    big = tar_gz({"SKILL.md": skill_md("beta", "Builds beta bundles."),
                  **{f"part{n}.bin": os.urandom(200_000) for n in range(20)}})
    site.publish([good, site.add_archive("beta", big)])
    db = tmp_path / "kill.sqlite"
    script = textwrap.dedent(f"""
        from pathlib import Path
        from skillindex.api import SkillIndex
        from skillindex.config import Environment, RootConfig, Settings
        env = Environment(home=Path({str(env.home)!r}), cwd=Path({str(env.cwd)!r}),
                          config_home=Path({str(env.config_home)!r}),
                          data_home=Path({str(env.data_home)!r}))
        settings = Settings(presets=False, roots=(RootConfig(path="", url={site.url!r}),))
        SkillIndex.open(settings, db={str(db)!r}, env=env).reindex()
    """)
    child = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while site.downloads(".tar.gz") == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    index = SkillIndex.open(settings(site), db=str(db), env=env)
    index.reindex(offline=True)
    for winner in index.winners():  # whatever is indexed is whole and verifies
        index.read(f"skill://{winner.name}")
    index.reindex()
    assert names(index) == ["alpha", "beta"]
    assert len(index.manifest("beta").files) == 21
    index.close()


def test_roots_explain_and_list_say_where_a_skill_came_from_and_that_it_is_stale(
        site: Publisher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_home

    isolate_home(tmp_path, monkeypatch)
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n[[roots]]\nurl = "{site.url}"\n')
    base = ["--config", str(config), "--db", str(tmp_path / "cli.sqlite")]
    runner = CliRunner()
    entries = three(site)
    site.publish(entries)
    first = runner.invoke(cli, [*base, "reindex"], catch_exceptions=False)
    assert first.exit_code == 0 and f"fetched {site.url}: 4 requests, 3 downloads" in first.output
    explained = runner.invoke(cli, [*base, "explain", "beta"], catch_exceptions=False)
    assert f"fetched from {site.url}/.well-known/agent-skills/beta.tar.gz " \
           f"({entries[1]['digest']})" in explained.output
    site.down = True
    runner.invoke(cli, [*base, "reindex"], catch_exceptions=False)
    roots = runner.invoke(cli, [*base, "roots"], catch_exceptions=False)
    assert "stale" in roots.output and f"from {site.url}, stale since " in roots.output
    assert "answered 503" in roots.output
    listed = runner.invoke(cli, [*base, "list"], catch_exceptions=False)
    assert "alpha" in listed.output and f"note: {site.url}: stale since " in listed.output
    offline = runner.invoke(cli, [*base, "--json", "reindex", "--offline"],
                            catch_exceptions=False)
    assert offline.exit_code == 0 and '"fetches": []' in offline.output


def test_a_url_roots_skills_are_read_over_mcp_as_local_ones_are(
        site: Publisher, env: Environment, db_url: str) -> None:
    import anyio
    from mcp import Client

    from skillindex.serve.mcp import create_server
    from tests.test_serve_mcp import content_bytes

    site.publish(three(site))
    index = opened(site, env, db_url)
    index.reindex()
    site.requests.clear()

    async def main() -> None:
        async with Client(create_server(index)) as client:
            listed = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "skill://beta/SKILL.md" in listed
            result = await client.read_resource("skill://beta/references/guide.md")
            assert content_bytes(result) == b"# Guide\n"

    anyio.run(main)
    assert site.requests == []  # serving never fetches
    index.close()


def test_local_commands_import_nothing_of_the_remote_machinery(tmp_path: Path) -> None:
    """A reindex and a listing of local roots import neither the HTTP client nor the fetcher,
    so URL roots cost local users nothing at start-up."""
    root = tmp_path / "skills"
    (root / "alpha").mkdir(parents=True)
    (root / "alpha" / "SKILL.md").write_bytes(skill_md("alpha"))
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n[[roots]]\npath = "{root}"\n')
    script = textwrap.dedent(f"""
        import sys
        from skillindex.cli import main
        for args in (["reindex"], ["list"], ["roots"], ["read", "skill://alpha"]):
            try:
                main(["--config", {str(config)!r}, "--db", {str(tmp_path / "x.sqlite")!r},
                      *args])
            except SystemExit as exc:
                assert not exc.code, (args, exc.code)
        loaded = sorted(name for name in ("httpx", "skillindex.index.remote",
                                          "skillindex.index.archive",
                                          "skillindex.query.wellknown") if name in sys.modules)
        print("LOADED", loaded)
    """)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, check=True)
    assert "LOADED []" in done.stdout


def test_without_the_http_client_a_url_root_is_stale_not_an_error(
        site: Publisher, env: Environment, db_url: str) -> None:
    """A reindex in an environment without the `remote` extra still indexes everything else
    and says, as the URL root's stale reason, what to install."""
    import subprocess as sub

    script = textwrap.dedent(f"""
        import sys
        sys.modules["httpx"] = None  # as if the remote extra were not installed
        from pathlib import Path
        from skillindex.api import SkillIndex
        from skillindex.config import Environment, RootConfig, Settings
        env = Environment(home=Path({str(env.home)!r}), cwd=Path({str(env.cwd)!r}),
                          config_home=Path({str(env.config_home)!r}),
                          data_home=Path({str(env.data_home)!r}))
        settings = Settings(presets=False, roots=(RootConfig(path="", url={site.url!r}),))
        report = SkillIndex.open(settings, db={db_url.removeprefix("sqlite:///")!r},
                                 env=env).reindex()
        print("STALE", report.fetches[0]["stale"])
    """)
    done = sub.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "STALE fetching a URL root needs the `remote` extra" in done.stdout
