"""What a URL root costs: a publisher on loopback serving N one-file skills, indexed cold, then
reindexed with nothing changed (the index answers 304), offline, and as a local root of the
same skills, each timed in this process; prints requests and seconds.

    python scripts/remotebench.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from skillindex.api import SkillIndex
from skillindex.config import Environment, RootConfig, Settings
from tests.publisher import serving, skill_md


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as scratch, serving() as site:
        base = Path(scratch)
        env = Environment(home=base, cwd=base, config_home=base / "config",
                          data_home=base / "data")
        entries = []
        local = base / "local"
        for number in range(count):
            name = f"skill-{number:05d}"
            data = skill_md(name, f"Does task number {number} for the benchmark.")
            entries.append(site.add_skill_md(name, data))
            (local / name).mkdir(parents=True)
            (local / name / "SKILL.md").write_bytes(data)
        site.publish(entries)
        url_root = Settings(presets=False, roots=(RootConfig(path="", url=site.url),))
        index = SkillIndex.open(url_root, db=str(base / "remote.sqlite"), env=env)
        figures = []
        for label, offline in (("cold (every artifact fetched)", False),
                               ("unchanged (index answers 304)", False),
                               ("unchanged, --offline", True)):
            site.requests.clear()
            clock = time.perf_counter()
            index.reindex(offline=offline)
            figures.append((label, len(site.requests), time.perf_counter() - clock))
        index.close()
        plain = SkillIndex.open(Settings(presets=False, roots=(RootConfig(path=str(local)),)),
                                db=str(base / "local.sqlite"), env=env)
        plain.reindex()
        clock = time.perf_counter()
        plain.reindex()
        figures.append(("local root, unchanged (floor)", 0, time.perf_counter() - clock))
        plain.close()
    floor = figures[-1][2]
    print(f"{count} skills")
    for label, requests, seconds in figures:
        print(f"  {label:<34} {requests:>6} requests  {seconds:7.3f} s  {seconds / floor:6.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
