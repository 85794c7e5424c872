"""The precision of `check`'s description-overlap warning on hand-labelled pairs of real skills.

`python -m scripts.overlap --sample DIR --propose N` prints pairs of the registry sample's skills
with their similarity, drawn evenly from the bands above 0.4, for a person to label (would a
request meant for one pick the other?); `python -m scripts.overlap --sample DIR` scores the
labels of scripts/relevance_data/overlap_labels.tsv: at each threshold, how many labelled pairs
it warns about and the share of those a person judged to overlap (precision).
"""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path

from skillindex.index import frontmatter
from skillindex.query.overlap import overlaps

LABELS = Path(__file__).resolve().with_name("relevance_data") / "overlap_labels.tsv"
# The registry appends this sentence to every description; no author wrote it.
AGGREGATOR = "Use when this capability is needed."
BANDS = (0.4, 0.5, 0.6, 0.7, 0.8, 1.01)
THRESHOLDS = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)


def skills(sample: Path) -> list[tuple[str, str, str]]:
    """(folder, name, description) of each SKILL.md of the sample, in folder order."""
    found = []
    for entry in sorted(sample.glob("*/SKILL.md")):
        parsed = frontmatter.parse(entry.read_bytes(), lenient=True)
        fields = parsed.fields or {}
        name, description = fields.get("name"), fields.get("description")
        if isinstance(description, str):
            description = description.removesuffix(AGGREGATOR).strip()
            found.append((entry.parent.name, str(name or entry.parent.name), description))
    return found


def scored(sample: Path) -> dict[tuple[str, str], tuple[float, str, str]]:
    found = skills(sample)
    pairs = overlaps([(name, description) for _, name, description in found],
                     threshold=BANDS[0])
    return {(found[p.first][0], found[p.second][0]):
            (p.score, found[p.first][2], found[p.second][2]) for p in pairs}


def propose(sample: Path, per_band: int) -> None:
    pairs = scored(sample)
    chosen = random.Random(44)
    for low, high in itertools.pairwise(BANDS):
        band = sorted(key for key, (score, *_) in pairs.items() if low <= score < high)
        for key in sorted(chosen.sample(band, min(per_band, len(band)))):
            score, first, second = pairs[key]
            print(f"{score:.3f}\t{key[0]}\t{key[1]}\n  A: {first[:300]}\n  B: {second[:300]}")


def score(sample: Path) -> None:
    pairs = scored(sample)
    labels = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            first, second, label = line.split("\t")[:3]
            labels[first, second] = label == "1"
    identical = sum(pairs[key][1] == pairs[key][2] for key in labels if key in pairs)
    print(f"{len(labels)} labelled pairs ({identical} with the same description), "
          f"{len(pairs)} pairs at 0.4 or more among {len(skills(sample))} skills")
    print("threshold  warned  overlap  precision  (without identical descriptions)")
    for threshold in THRESHOLDS:
        warned = [key for key in labels if key in pairs and pairs[key][0] >= threshold]
        right = sum(labels[key] for key in warned)
        other = [key for key in warned if pairs[key][1] != pairs[key][2]]
        other_right = sum(labels[key] for key in other)
        print(f"{threshold:9.2f}  {len(warned):6}  {right:7}  {right / max(len(warned), 1):9.3f}"
              f"  ({other_right}/{len(other)} = {other_right / max(len(other), 1):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, required=True,
                        help="the registry sample: a folder of <skill>/SKILL.md")
    parser.add_argument("--propose", type=int, metavar="N",
                        help="print N pairs of each similarity band to label")
    args = parser.parse_args()
    if args.propose:
        propose(args.sample, args.propose)
    else:
        score(args.sample)


if __name__ == "__main__":
    main()
