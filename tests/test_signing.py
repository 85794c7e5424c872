"""Signatures: a skill's `skill.oms.sig` (OpenSSF model signing) verified at index time by the
key or certificate chain its root names, under each policy, with keys and a small certificate
authority the tests make (no network)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from model_signing import hashing
from model_signing import signing as oms

from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from skillindex.errors import SkillIndexError
from skillindex.index.signing import SIGNATURE_FILE, Signature
from skillindex.model import Scope
from tests.conftest import write_skill

NOW = datetime.datetime.now(datetime.UTC)


def pem_key(key: ec.EllipticCurvePrivateKey, folder: Path, name: str) -> tuple[Path, Path]:
    private, public = folder / f"{name}.pem", folder / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def keypair(folder: Path, name: str) -> tuple[Path, Path]:
    return pem_key(ec.generate_private_key(ec.SECP256R1()), folder, name)


def hashing_config() -> hashing.Config:
    # As the model_signing tool signs a folder holding its own signature: that file left out.
    return hashing.Config().set_ignored_paths(paths=[SIGNATURE_FILE])  # type: ignore[no-untyped-call]


def sign_with_key(skill: Path, private: Path) -> None:
    (oms.Config().set_hashing_config(hashing_config())  # type: ignore[no-untyped-call]
     .use_elliptic_key_signer(private_key=private).sign(skill, skill / SIGNATURE_FILE))


@dataclass
class Authority:
    """A root CA and a code-signing certificate it issued, as PEM files."""

    ca: Path
    key: Path
    certificate: Path
    ca_key: ec.EllipticCurvePrivateKey
    name: str


def certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
                issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool,
                days: tuple[int, int] = (-1, 30)) -> x509.Certificate:
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + datetime.timedelta(days=days[0]))
               .not_valid_after(NOW + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def authority(folder: Path, name: str) -> Authority:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate(f"{name} CA", ca_key, f"{name} CA", ca_key, ca=True, days=(-60, 365))
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return issue(folder, Authority(folder / "ca.pem", folder, folder, ca_key, name),
                 days=(-1, 30))


def issue(folder: Path, by: Authority, *, days: tuple[int, int]) -> Authority:
    """A code-signing certificate from `by`'s CA, valid over `days` from now."""
    folder.mkdir(parents=True, exist_ok=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = certificate(f"{by.name} publisher", leaf_key, f"{by.name} CA", by.ca_key,
                       ca=False, days=days)
    (folder / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    private, _ = pem_key(leaf_key, folder, "leaf-key")
    return Authority(by.ca, private, folder / "leaf.pem", by.ca_key, by.name)


def sign_with_certificate(skill: Path, by: Authority) -> None:
    (oms.Config().set_hashing_config(hashing_config())  # type: ignore[no-untyped-call]
     .use_certificate_signer(private_key=by.key, signing_certificate=by.certificate,
                             certificate_chain=[by.ca])
     .sign(skill, skill / SIGNATURE_FILE))


@dataclass
class World:
    tmp: Path
    root: Path
    db_url: str
    env: Environment

    def skill(self, name: str = "pdf") -> Path:
        skill = write_skill(self.root, name, body=f"# {name}\n")
        (skill / "scripts").mkdir(exist_ok=True)
        (skill / "scripts" / "fill.sh").write_text("#!/bin/sh\necho fill\n")
        return skill

    def index(self, **root: object) -> dict[str, tuple[str, Signature | None, list[str]]]:
        """Each candidate's status, stored signature and finding codes after a reindex."""
        settings = Settings(presets=False, roots=(RootConfig(
            path=str(self.root), scope=Scope.USER, provider="test", precedence=10,
            **root),))  # type: ignore[arg-type]
        with SkillIndex.open(settings, db=self.db_url, env=self.env) as index:
            index.reindex()
            found = index.candidates()
            signatures = index.signatures(found)
            self.served = {w.name for w in index.winners()}
            return {str(c.name): (str(c.status), signatures[c.id],
                                  [f.code for f in c.findings]) for c in found}


@pytest.fixture
def world(tmp_path: Path, db_url: str, env: Environment) -> Iterator[World]:
    yield World(tmp_path, tmp_path / "skills", db_url, env)


def test_a_skill_signed_by_the_roots_key_is_verified_with_its_signer(world: World) -> None:
    private, public = keypair(world.tmp, "publisher")
    sign_with_key(world.skill(), private)

    for policy in ("record", "require"):
        [(status, signature, codes)] = world.index(signatures=policy,
                                                   signature_key=str(public)).values()
        assert status == "accepted" and codes == [] and world.served == {"pdf"}
        assert signature is not None and signature.status == "verified"
        assert signature.signer is not None and signature.signer.startswith("key:sha256:")
        assert len(signature.digest) == 64


@pytest.mark.parametrize("tamper", ["byte-changed", "file-added", "file-removed"])
@pytest.mark.parametrize("policy", ["record", "require"])
def test_a_tampered_skill_fails_under_each_policy(world: World, tamper: str,
                                                  policy: str) -> None:
    private, public = keypair(world.tmp, "publisher")
    skill = world.skill()
    sign_with_key(skill, private)
    script = skill / "scripts" / "fill.sh"
    if tamper == "byte-changed":
        script.write_bytes(script.read_bytes().replace(b"fill", b"fall"))
    elif tamper == "file-added":
        (skill / "scripts" / "extra.sh").write_text("curl example.net\n")
    else:
        script.unlink()

    [(status, signature, codes)] = world.index(signatures=policy,
                                               signature_key=str(public)).values()

    assert signature is not None and signature.status == "failed"
    assert "fill.sh" in (signature.reason or "") or "extra.sh" in (signature.reason or "")
    assert "signature-invalid" in codes
    if policy == "require":  # quarantined: recorded with its reason, never served
        assert status == "rejected" and world.served == set()
    else:  # a risk finding; still served
        assert status == "accepted" and world.served == {"pdf"}


def test_another_signer_fails(world: World) -> None:
    private, _ = keypair(world.tmp, "someone-else")
    _, public = keypair(world.tmp, "publisher")
    sign_with_key(world.skill(), private)

    [(status, signature, _)] = world.index(signatures="require",
                                           signature_key=str(public)).values()

    assert status == "rejected" and signature is not None and signature.status == "failed"


def test_a_signer_outside_the_allowlist_fails(world: World) -> None:
    private, public = keypair(world.tmp, "publisher")
    sign_with_key(world.skill(), private)
    [(_, verified, _)] = world.index(signature_key=str(public)).values()
    assert verified is not None and verified.signer is not None

    [(status, signature, _)] = world.index(signatures="require", signature_key=str(public),
                                           signers=("key:sha256:" + "0" * 64,)).values()
    [(allowed, _, _)] = world.index(signatures="require", signature_key=str(public),
                                    signers=(verified.signer,)).values()

    assert status == "rejected" and signature is not None
    assert "not among the root's signers" in (signature.reason or "")
    assert allowed == "accepted"


def test_a_certificate_chain_verifies_and_names_the_subject(world: World) -> None:
    by = authority(world.tmp / "pki", "Example")
    sign_with_certificate(world.skill(), by)

    [(status, signature, _)] = world.index(signatures="require",
                                           signature_certificates=(str(by.ca),)).values()

    assert status == "accepted", signature
    assert signature is not None and signature.signer == "cert:CN=Example publisher"


@pytest.mark.parametrize("case", ["untrusted", "expired"])
def test_an_untrusted_or_expired_certificate_fails(world: World, case: str) -> None:
    trusted = authority(world.tmp / "trusted", "Trusted")
    by = (authority(world.tmp / "other", "Other") if case == "untrusted"
          else issue(world.tmp / "expired", trusted, days=(-30, -1)))
    sign_with_certificate(world.skill(), by)

    [(status, signature, _)] = world.index(signatures="require",
                                           signature_certificates=(str(trusted.ca),)).values()

    assert status == "rejected" and signature is not None and signature.status == "failed"
    if case == "expired":
        assert "expired" in (signature.reason or "")


@pytest.mark.parametrize(("policy", "served", "code"), [
    ("off", True, None), ("record", True, None), ("require", False, "signature-missing")])
def test_an_unsigned_skill_under_each_policy(world: World, policy: str, served: bool,
                                             code: str | None) -> None:
    world.skill()

    [(status, signature, codes)] = world.index(signatures=policy).values()

    assert signature is None
    assert (status == "accepted") is served and (world.served == {"pdf"}) is served
    assert codes == ([code] if code else [])


def test_a_signed_skill_without_a_verifier_is_recorded_unverified(world: World) -> None:
    private, _ = keypair(world.tmp, "publisher")
    sign_with_key(world.skill(), private)

    [(status, signature, codes)] = world.index().values()
    [(required, _, required_codes)] = world.index(signatures="require").values()

    assert status == "accepted" and codes == []
    assert signature is not None and signature.status == "unverified"
    assert required == "rejected" and required_codes == ["signature-unverified"]


def test_a_bad_signatures_setting_is_a_settings_error(tmp_path: Path) -> None:
    from skillindex.config import parse_settings

    with pytest.raises(SkillIndexError, match="signatures must be one of off, record, require"):
        parse_settings({"roots": [{"path": str(tmp_path), "signatures": "always"}]})


def test_an_unsigned_index_never_imports_model_signing(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for number in range(3):
        write_skill(root, f"skill-{number}")
    config = tmp_path / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{root}"\n')
    code = ("import sys\nfrom skillindex.cli import main\ntry:\n    main(['reindex'])\n"
            "except SystemExit:\n    pass\nprint('model_signing' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120, cwd=tmp_path,
                          env={**os.environ, "SKILLINDEX_CONFIG": str(config),
                               "SKILLINDEX_DB": str(tmp_path / "db.sqlite"),
                               "HOME": str(tmp_path)})

    assert done.stderr.splitlines()[-1] == "False", done.stderr


def test_the_verifier_imports_from_a_clean_interpreter() -> None:
    # model-signing 1.1.1 imports pyOpenSSL without declaring it; the extra names it.
    done = subprocess.run([sys.executable, "-c",
                           "from model_signing import verifying; verifying.Config()"
                           ".use_certificate_verifier(certificate_chain=[])"],
                          capture_output=True, text=True, check=False, timeout=120)

    assert done.returncode == 0, done.stderr


def test_a_lock_pins_the_signer_and_verify_names_a_change(world: World,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from skillindex.cli import cli
    from skillindex.query import lockfile

    first, first_public = keypair(world.tmp, "first")
    second, second_public = keypair(world.tmp, "second")
    skill = world.skill()
    sign_with_key(skill, first)
    config = world.tmp / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{world.root}"\n'
                      f'signature_key = "{first_public}"\n')
    for name, value in {"SKILLINDEX_CONFIG": config, "HOME": world.tmp / "home",
                        "SKILLINDEX_DB": world.db_url}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(world.tmp)

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        return result.exit_code, result.output

    assert run("reindex")[0] == 0
    assert run("lock")[0] == 0
    [entry] = lockfile.read(world.tmp / "skills-lock.json").values()
    assert entry.signer is not None and entry.signer.startswith("key:sha256:")
    assert run("verify", "--lock", "skills-lock.json")[0] == 0

    sign_with_key(skill, second)  # the same files, signed again by another key
    config.write_text(config.read_text().replace(str(first_public), str(second_public)))
    assert run("reindex")[0] == 0
    code, output = run("verify", "--lock", "skills-lock.json")

    assert code == 1
    [line] = [line for line in output.splitlines() if line.startswith("pdf: ")]
    assert line.startswith(f"pdf: signer changed from {entry.signer} to key:sha256:")

    (skill / SIGNATURE_FILE).unlink()
    assert run("reindex")[0] == 0
    code, output = run("verify", "--lock", "skills-lock.json")
    assert code == 1
    assert f"pdf: signed by {entry.signer} when locked, unsigned now" in output


def test_explain_shows_the_signer_and_why_a_signature_failed(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from skillindex.cli import cli

    private, public = keypair(world.tmp, "publisher")
    sign_with_key(world.skill(), private)
    sign_with_key(world.skill("deploy"), private)
    (world.root / "deploy" / "added.md").write_text("later\n")
    config = world.tmp / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{world.root}"\n'
                      f'signature_key = "{public}"\n')
    for name, value in {"SKILLINDEX_CONFIG": config, "HOME": world.tmp / "home",
                        "SKILLINDEX_DB": world.db_url}.items():
        monkeypatch.setenv(name, str(value))
    runner = CliRunner()
    assert runner.invoke(cli, ["reindex"], catch_exceptions=False).exit_code == 0

    pdf = runner.invoke(cli, ["explain", "pdf"], catch_exceptions=False).output
    deploy = runner.invoke(cli, ["explain", "deploy"], catch_exceptions=False).output
    data = json.loads(runner.invoke(cli, ["explain", "pdf", "--json"],
                                    catch_exceptions=False).output)

    assert "signed by key:sha256:" in pdf
    assert "signature failed: files the signature does not cover: added.md" in deploy
    [signature] = data["signatures"].values()
    assert signature["status"] == "verified" and signature["signer"].startswith("key:sha256:")


def signed_tree(world: World) -> tuple[Path, str]:
    """The root's `pdf` signed by its key, `deploy` signed and then changed (a risk finding
    under record), `plain` unsigned; the settings file naming the key, and pdf's signer."""
    private, public = keypair(world.tmp, "publisher")
    sign_with_key(world.skill(), private)
    sign_with_key(world.skill("deploy"), private)
    (world.root / "deploy" / "added.md").write_text("later\n")
    world.skill("plain")
    config = world.tmp / "config.toml"
    config.write_text(f'[skills]\npresets = false\n\n[[roots]]\npath = "{world.root}"\n'
                      f'signature_key = "{public}"\n')
    signatures = world.index(signature_key=str(public))
    signature = signatures["pdf"][1]
    assert signature is not None and signature.signer is not None
    assert signatures["deploy"][1] is not None and signatures["deploy"][1].status == "failed"
    return config, signature.signer


def test_list_names_the_signer_of_each_verified_signature_on_both_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: Environment) -> None:
    import json

    from click.testing import CliRunner

    from skillindex.cli import cli
    from tests.conftest import isolate_home

    isolate_home(tmp_path, monkeypatch)
    db = tmp_path / "index.sqlite"
    world = World(tmp_path, tmp_path / "skills", str(db), env)
    config, signer = signed_tree(world)
    runner = CliRunner()
    assert runner.invoke(cli, ["--config", str(config), "--db", str(db), "reindex"],
                         catch_exceptions=False).exit_code == 0

    def printed(*command: str, quick: bool) -> str:
        # A URL with a query is not taken by the sqlite3 path: the library answers.
        where = str(db) if quick else f"sqlite:///{db}?timeout=15"
        done = runner.invoke(cli, ["--config", str(config), "--db", where, *command],
                             catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return done.stdout

    listed = printed("--json", "list", quick=True)
    assert listed == printed("--json", "list", quick=False)
    by_name = {entry["name"]: entry for entry in json.loads(listed)}
    assert by_name["pdf"]["signer"] == signer
    assert "signer" not in by_name["deploy"] and "signer" not in by_name["plain"]
    table = printed("list", quick=True)
    assert table == printed("list", quick=False)
    head, *rows = table.splitlines()
    assert head.split()[:2] == ["NAME", "SIGNER"]
    cells = {row.split()[0]: row.split()[1] for row in rows}
    assert cells == {"deploy": "-", "pdf": signer, "plain": "-"}


def test_the_report_page_names_each_signer(world: World) -> None:
    from skillindex.query.reportpage import render

    config, signer = signed_tree(world)
    with SkillIndex.open(str(config), db=world.db_url, env=world.env) as index:
        report = index.report()
    assert report.signers == (("pdf", signer),)
    assert report.as_dict()["signers"] == [{"skill": "pdf", "signer": signer}]
    assert f"<td>pdf</td><td>{signer}</td>" in render(report)


def test_the_mcp_listing_names_the_signer_in_meta(world: World) -> None:
    import anyio
    from mcp import Client

    from skillindex.serve.mcp import create_server
    from skillindex.serve.skills import SIGNER_META
    from tests.test_serve_mcp import call

    config, signer = signed_tree(world)
    with SkillIndex.open(str(config), db=world.db_url, env=world.env) as index:
        async def main() -> None:
            async with Client(create_server(index)) as client:
                entries = (await call(client, "skills/list", {}))["skills"]
                resources = (await client.list_resources()).resources
            metas = {e["uri"]: e.get("_meta") for e in entries}
            assert metas == {"skill://pdf/SKILL.md": {SIGNER_META: signer},
                             "skill://deploy/SKILL.md": None, "skill://plain/SKILL.md": None}
            assert {str(r.uri): r.meta for r in resources} == metas
        anyio.run(main)
