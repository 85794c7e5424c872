"""Catalog names that people and hosts may take for one another: equal once Unicode-normalized
(NFKC: `é` composed or not, fullwidth letters) and with look-alike letters of other scripts read
as the Latin ones (Cyrillic `\u0440` as `p`)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

# The finding a reindex records on each winner whose name looks like another winner's.
NAME_CONFUSABLE = "name-confusable"

# Letters of other scripts drawn like a Latin letter in common fonts (after NFKC), written
# as escapes so that this file holds no look-alike itself.
_LOOK_ALIKE = str.maketrans({
    # Cyrillic
    "\u0430": "a", "\u0432": "b", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c",
    "\u0443": "y", "\u0445": "x", "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u0501": "d",
    "\u051b": "q", "\u051d": "w", "\u04bb": "h", "\u04cf": "l", "\u0410": "A", "\u0412": "B",
    "\u0415": "E", "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P",
    "\u0421": "C", "\u0422": "T", "\u0425": "X", "\u0406": "I", "\u0408": "J", "\u0405": "S",
    # Greek
    "\u03bf": "o", "\u03bd": "v", "\u03b9": "i", "\u0391": "A", "\u0392": "B", "\u0395": "E",
    "\u0396": "Z", "\u0397": "H", "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N",
    "\u039f": "O", "\u03a1": "P", "\u03a4": "T", "\u03a5": "Y", "\u03a7": "X",
    # Latin letters drawn like others
    "\u0131": "i", "\u0251": "a", "\u0261": "g",
})


def skeleton(name: str) -> str:
    """What `name` looks like: NFKC, then look-alike letters as the Latin ones. An ASCII name
    is its own skeleton."""
    if name.isascii():
        return name
    return unicodedata.normalize("NFKC", name).translate(_LOOK_ALIKE)


def skeletons(names: Iterable[str]) -> set[str]:
    """The skeletons of the names that are not ASCII: what an ASCII name must be to look
    like one of them."""
    return {skeleton(name) for name in names if not name.isascii()}


def confusable_names(winners: Iterable[tuple[str, int]]) -> dict[int, list[str]]:
    """The `name-confusable` messages of the winners (catalog name, candidate id) whose name
    looks like another winner's: each side gets one. Only the winners that can look alike need
    be given: the names that are not ASCII and the ASCII names among their skeletons."""
    by_skeleton: dict[str, dict[str, list[int]]] = {}
    for name, cid in winners:
        by_skeleton.setdefault(skeleton(name), {}).setdefault(name, []).append(cid)
    found: dict[int, list[str]] = {}
    for names in by_skeleton.values():
        if len(names) < 2:
            continue
        for name, ids in names.items():
            # ascii(): two spellings of one look are told apart in the message itself.
            others = ", ".join(ascii(other) for other in sorted(names) if other != name)
            message = (f"the name {name!a} looks like {others} (one name once Unicode-"
                       "normalized, look-alike letters read as Latin): a host or a person may "
                       "load one for the other; rename one of them")
            for cid in ids:
                found.setdefault(cid, []).append(message)
    return found
