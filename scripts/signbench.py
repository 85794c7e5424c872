"""What signatures cost (scripts/bench.py --signatures): a cold index of unsigned skills with
`signatures = "record"` (the default) against `"off"` in the same run, the two in alternating
order, and the time to verify one signed skill (and the library's import, once per process)."""

from __future__ import annotations

import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripts.benchkit import generate, settings_file


def run(work: Path, size: int, repeat: int) -> dict[str, Any]:
    from skillindex import SkillIndex

    base = work / f"signatures-{size}"
    roots = generate(base / "tree", size, "users")
    record = settings_file(base, roots)
    off = base / "config-off.toml"
    off.write_text(record.read_text().replace("\nprecedence = ",
                                              '\nsignatures = "off"\nprecedence = '))
    times: dict[str, list[float]] = {"record": [], "off": []}
    with SkillIndex.open(off, db=str(base / "warm-up.sqlite"), cwd=base) as index:
        index.reindex(jobs=1)  # the first index of a process also pays its imports and caches
    for number in range(max(repeat, 1) * 2):
        for label in (("record", "off") if number % 2 == 0 else ("off", "record")):
            db = base / f"{label}-{number}.sqlite"
            config = record if label == "record" else off
            with SkillIndex.open(config, db=str(db), cwd=base) as index:
                # CPU time of this process (the reindex runs in it, jobs=1): on a shared
                # machine it moves far less with the neighbours than wall time does.
                started = time.process_time()
                index.reindex(jobs=1)
                times[label].append(time.process_time() - started)
            db.unlink()
    result: dict[str, Any] = {"skills": size,
                              "cold_record_cpu_s": statistics.median(times["record"]),
                              "cold_off_cpu_s": statistics.median(times["off"])}
    result["record_over_off"] = result["cold_record_cpu_s"] / result["cold_off_cpu_s"]
    result["runs_cpu_s"] = times
    result.update(verify_one())
    return result


def verify_one(repeat: int = 20) -> dict[str, float]:
    """Seconds to verify one signed skill of four small files by a public key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from skillindex.index.signing import SIGNATURE_FILE, examine
    from skillindex.model import SigningPolicy

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        key = ec.generate_private_key(ec.SECP256R1())
        (work / "key.pem").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        (work / "key.pub").write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        skill = work / "skill"
        (skill / "scripts").mkdir(parents=True)
        (skill / "SKILL.md").write_text("---\nname: skill\ndescription: Signed.\n---\n# Body\n")
        for name in ("one.sh", "two.sh", "three.py"):
            (skill / "scripts" / name).write_text(f"echo {name}\n" * 50)
        files: dict[str, str | None] = {
            p.relative_to(skill).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in skill.rglob("*") if p.is_file()}
        policy = SigningPolicy(key=str(work / "key.pub"))
        files[SIGNATURE_FILE] = None
        from model_signing import hashing, signing

        (signing.Config().set_hashing_config(  # type: ignore[no-untyped-call]
            hashing.Config().set_ignored_paths(paths=[SIGNATURE_FILE]))  # type: ignore[no-untyped-call]
         .use_elliptic_key_signer(private_key=work / "key.pem")
         .sign(skill, skill / SIGNATURE_FILE))
        warm = []
        for _ in range(repeat):
            started = time.perf_counter()
            found = examine(str(skill), files, policy)
            warm.append(time.perf_counter() - started)
        assert found is not None and found.status == "verified", found
    return {"verify_import_s": _import_seconds(), "verify_one_s": statistics.median(warm)}


def _import_seconds() -> float:
    """What importing the verifier costs a process that verifies its first signature."""
    code = ("import time; t = time.perf_counter(); from model_signing import hashing, verifying; "
            "print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return float(done.stdout)


def table(result: dict[str, Any]) -> str:
    return "\n".join([
        f"signatures at {result['skills']:,} unsigned skills (one process, median CPU time)",
        f"  cold index, signatures = record  {result['cold_record_cpu_s']:.3f} s",
        f"  cold index, signatures = off     {result['cold_off_cpu_s']:.3f} s",
        f"  record / off                      {result['record_over_off']:.3f}",
        f"  verify one signed skill           {result['verify_one_s'] * 1000:.2f} ms "
        f"(once per process, importing the library: {result['verify_import_s'] * 1000:.0f} ms)",
    ])
