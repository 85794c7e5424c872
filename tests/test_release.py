"""The release artefacts: the wheel, built from the sdist, installs into a fresh environment
outside the checkout and indexes, catalogs and reads with its own migrations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import skillindex

REPO = Path(__file__).resolve().parent.parent

# About half a minute (a build, an environment, its dependencies): `.ci/run` builds the
# artefacts once and names the wheel in SKILLINDEX_WHEEL, so the test does not build again.
pytestmark = pytest.mark.release


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if built := os.environ.get("SKILLINDEX_WHEEL"):
        return Path(built)
    out = tmp_path_factory.mktemp("dist")
    # The wheel is built from the sdist (build's default), so a file the sdist lacks fails here.
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                   check=True, capture_output=True)
    (found,) = out.glob("skillindex-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` folder of a fresh virtual environment holding the wheel and its dependencies."""
    where = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(where, with_pip=True)
    subprocess.run([where / "bin" / "python", "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True)
    return where / "bin"


def run(bin_dir: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home),
                   "XDG_CONFIG_HOME": str(home / ".config"),
                   "XDG_DATA_HOME": str(home / ".local" / "share")}
    return subprocess.run([str(bin_dir / "skillindex"), *args], cwd=home, env=environment,
                          capture_output=True, text=True, check=False)


def test_the_wheel_is_named_by_the_one_version(wheel: Path) -> None:
    assert wheel.name.startswith(f"skillindex-{skillindex.__version__}-")


def test_the_installed_wheel_names_itself_in_the_hint_for_a_missing_extra(
        installed: Path, wheel: Path, tmp_path: Path) -> None:
    # The fresh environment has no mcp: the hint adds it from the very wheel installed.
    home = tmp_path / "home"
    home.mkdir()
    served = run(installed, home, "serve")
    assert served.returncode == 1
    assert served.stderr == ("skillindex: error: skillindex serve needs the mcp extra: "
                             f"install it with: pip install '{wheel.resolve()}[mcp]'\n")


def test_the_installed_wheel_indexes_catalogs_and_reads(installed: Path,
                                                        tmp_path: Path) -> None:
    home = tmp_path / "home"
    skill = home / "project" / ".claude" / "skills" / "pdf"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: Fill in PDF forms.\n---\n# PDF\nUse the form tool.\n")
    project = str(home / "project")

    version = run(installed, home, "--version")
    assert version.returncode == 0 and skillindex.__version__ in version.stdout
    # The package that runs is the installed one, not this checkout.
    where = subprocess.run([str(installed / "python"), "-c",
                            "import skillindex; print(skillindex.__file__)"],
                           cwd=home, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(installed.parent)) and not where.startswith(str(REPO))

    reindex = run(installed, home, "--cwd", project, "reindex")
    assert reindex.returncode == 0, reindex.stderr
    catalog = run(installed, home, "--cwd", project, "catalog")
    assert catalog.returncode == 0 and "Fill in PDF forms." in catalog.stdout, catalog.stderr
    read = run(installed, home, "--cwd", project, "read", "skill://pdf")
    assert read.returncode == 0 and "Use the form tool." in read.stdout, read.stderr

    # Alembic's migrations, shipped inside the package, build a database step by step.
    migrated = run(installed, home, "--db", str(home / "migrated.sqlite"), "--json",
                   "db", "upgrade")
    assert migrated.returncode == 0, migrated.stderr
    assert json.loads(migrated.stdout)["revision"]


def test_the_wheel_carries_the_license(wheel: Path) -> None:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        licenses = [name for name in archive.namelist() if name.endswith("/licenses/LICENSE")]
        assert licenses
        assert archive.read(licenses[0]).startswith(b"MIT License")
