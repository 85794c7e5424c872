"""Runs skillindex commands against an index on a real small file system: a size-limited tmpfs
mounted in a mount namespace of the test's own (`unshare --user --map-root-user --mount`), which
the test may fill to its last block or remount read-only. Nothing outside the namespace sees it.

The parent (`SmallDisk.run`) writes the steps as JSON and starts this module inside the
namespace, which mounts the tmpfs, runs the steps in order and writes what each command did to a
file outside the mount. Run as a script: `python -m tests.faultfs STEPS RESULTS`.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
UNPRIVILEGED = 1000  # the uid the test's user is inside `unprivileged`'s namespace
UNSHARE = ("unshare", "--user", "--map-root-user", "--mount", "--propagation", "private")


@functools.cache
def unavailable() -> str | None:
    """Why a tmpfs cannot be mounted here (no unshare, user namespaces switched off); None when
    it can."""
    if shutil.which("unshare") is None:
        return "no unshare command on this machine"
    probe = subprocess.run([*UNSHARE, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True, check=False, timeout=60)
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a user namespace: {probe.stderr.strip()}"
    return None


@dataclass(frozen=True, slots=True)
class Done:
    """What one command did: its exit code and its output."""

    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True, slots=True)
class SmallDisk:
    """A tmpfs of `size_kb` at `mount` (an empty folder), for one run of steps."""

    mount: Path
    size_kb: int

    def run(self, steps: list[list[str]], *, env: dict[str, str]) -> list[Done]:
        """Run the steps inside a namespace where the tmpfs is mounted; a step is one of
        `["copy", SRC, DST]`, `["fill", KB]` (write a file until the disk is full, then give
        KB back; KB may be left out), `["free"]` (remove that file), `["clear"]` (remove every
        file), `["remount-ro"]`, `["export", SRC, DST]` (copy out of the
        tmpfs) or `["cli", ARG...]` (one skillindex command, whose Done is returned)."""
        base = self.mount.parent
        spec, results = base / "steps.json", base / "results.json"
        spec.write_text(json.dumps({"mount": str(self.mount), "size_kb": self.size_kb,
                                    "steps": steps}))
        done = subprocess.run([*UNSHARE, sys.executable, "-m", "tests.faultfs", str(spec),
                               str(results)], cwd=REPO, env=env, capture_output=True,
                              text=True, check=False, timeout=600)
        assert done.returncode == 0, done.stderr
        return [Done(**item) for item in json.loads(results.read_text())]


def unprivileged(command: list[str], *, env: dict[str, str]) -> Done:
    """`command` as a user without privileges, even when the tests run as root: in a user
    namespace of its own, as a uid other than 0, so file modes apply to it (it owns what the
    test's user owns, and may read that user's folders)."""
    if os.geteuid() != 0 and unavailable() is not None:
        prefix: tuple[str, ...] = ()
    else:
        prefix = ("unshare", "--user", f"--map-user={UNPRIVILEGED}",
                  f"--map-group={UNPRIVILEGED}")
    done = subprocess.run([*prefix, *command], env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    return Done(done.returncode, done.stdout, done.stderr)


def _fill(mount: Path, keep_kb: int) -> None:
    block = b"\0" * 4096
    with open(mount / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(block)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    # The last partial block too: nothing at all is left.
    with open(mount / "filler-tail", "wb", buffering=0) as tail:
        try:
            while True:
                tail.write(b"\0")
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    if keep_kb:
        written = mount / "filler"
        os.truncate(written, max(0, written.stat().st_size - keep_kb * 1024))


def _inside(spec_path: str, results_path: str) -> None:
    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    mount = Path(spec["mount"])
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={spec['size_kb']}k,mode=0755", "tmpfs",
                    str(mount)], check=True)
    results = []
    for step, *args in spec["steps"]:
        if step in {"copy", "export"}:
            shutil.copyfile(args[0], args[1])
        elif step == "fill":
            _fill(mount, int(args[0]) if args else 0)
        elif step == "clear":
            for path in mount.iterdir():
                path.unlink()
        elif step == "free":
            for name in ("filler", "filler-tail"):
                (mount / name).unlink(missing_ok=True)
        elif step == "remount-ro":
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        elif step == "cli":
            done = subprocess.run([sys.executable, "-m", "skillindex", *args],
                                  capture_output=True, text=True, check=False, timeout=300)
            results.append({"code": done.returncode, "stdout": done.stdout,
                            "stderr": done.stderr})
        else:
            raise ValueError(f"unknown step {step!r}")
    Path(results_path).write_text(json.dumps(results))
    os.sync()


if __name__ == "__main__":
    _inside(*sys.argv[1:3])
