"""Renders the level-1 catalog the model sees: budgeted, escaped for its format, deterministic."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import chain, repeat, takewhile
from typing import Any, Literal

from skillindex import text as escape

Format = Literal["xml", "markdown", "json"]
FORMATS: tuple[Format, ...] = ("xml", "markdown", "json")
DEFAULT_MAX_CHARS = 8_000
# The share of a context window the catalog may take, and the characters a token stands for.
WINDOW_SHARE = 0.02
CHARS_PER_TOKEN = 4
ELLIPSIS = "…"
# A description cut below this many characters says nothing; names-only lines are better then.
MIN_DESCRIPTION = 16


PINNED, NAMES_ONLY = "pinned", "names-only"


@dataclass(frozen=True, slots=True)
class CatalogItem:
    """One winning skill, in catalog order, before budgeting; `mode` as in query/modes.py."""

    name: str
    description: str
    location: str
    mode: str = "listed"
    # Whether the skill has a description: None to judge by `description`. A catalog fetches
    # descriptions only for the skills its budget can show one for (see `describable`); the
    # rest arrive with "" and this flag, which marks a names-only entry as shortened.
    described: bool | None = None
    why: str = ""  # for a names-only skill, why its mode is that
    rank: int | None = None  # in a catalog ranked by a search: 1 for the best match


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    name: str
    description: str
    location: str
    truncated: bool = False
    chars: int = 0  # the length of this entry's text (the frame and separators not counted)
    why: str = ""  # why its description is shortened or not shown, when it is
    # The globs of a conditional skill (`paths`, `globs`): offered when the work touches them.
    conditional: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        shown: dict[str, object] = {
            "name": self.name, "description": self.description, "location": self.location,
            "truncated": self.truncated, "chars": self.chars}
        if self.why:
            shown["why"] = self.why
        if self.conditional:
            shown["conditional"] = list(self.conditional)
        return shown

    @classmethod
    def of_dict(cls, data: dict[str, Any]) -> CatalogEntry:
        return cls(**{**data, "conditional": tuple(data.get("conditional", ()))})


@dataclass(frozen=True, slots=True)
class SearchHint:
    """The line a catalog ends with when it cannot show every skill: how many it leaves out
    and what finds them (`finder`, e.g. "the search_skills tool"). `elsewhere` counts skills
    left out before the items reached the catalog."""

    finder: str
    elsewhere: int = 0


@dataclass(frozen=True, slots=True)
class Tail:
    """The items after those a catalog is built from, known by name, location (and rank)
    alone: past the ones `describable` counts, not pinned. The catalog leaves them all out,
    as it would have had it been given them whole, when what its budget has left is too
    small for the shortest entry any of them could have; else it raises `Unspent`."""

    names: Sequence[str] = ()
    locations: Sequence[str] = ()
    ranks: Sequence[int | None] = ()


NO_TAIL = Tail()


class Unspent(Exception):
    """A catalog given a `Tail` did not spend its budget before it: it needs the items up to
    `needed` (an index into the tail) in full."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


# How a host without MCP finds the skills a catalog leaves out.
SEARCH_COMMAND = 'the command `skillindex search "what you need"`'


@dataclass(frozen=True, slots=True)
class Omitted:
    """A skill left out of the catalog, and why."""

    name: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Catalog:
    text: str
    format: Format
    max_chars: int
    entries: tuple[CatalogEntry, ...]
    # Parallel tuples rather than Omitted values: a budget can leave out tens of thousands of
    # skills, and a cached catalog should not rebuild an object for each one it never shows.
    omitted_names: tuple[str, ...] = ()
    omitted_reasons: tuple[str, ...] = ()
    ranked_by: str = "precedence"  # or "usage", or "query" for a catalog ranked by a search

    @property
    def omitted(self) -> tuple[Omitted, ...]:
        return tuple(map(Omitted, self.omitted_names, self.omitted_reasons))

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def truncated(self) -> tuple[CatalogEntry, ...]:
        return tuple(entry for entry in self.entries if entry.truncated)

    def as_dict(self) -> dict[str, object]:
        return {"text": self.text, "format": self.format, "chars": self.chars,
                "max_chars": self.max_chars, "ranked_by": self.ranked_by,
                "entries": [e.as_dict() for e in self.entries],
                "omitted": [o.as_dict() for o in self.omitted]}

    def to_cache(self) -> str:
        """A compact JSON form, quick to load however many skills were left out: the omitted
        names as one newline-separated string (a list in the rare store whose names hold a
        newline, as an older version could keep), their reasons as runs of (reason, count)."""
        runs: list[list[Any]] = []
        for reason in self.omitted_reasons:
            if runs and runs[-1][0] == reason:
                runs[-1][1] += 1
            else:
                runs.append([reason, 1])
        joined = "\n".join(self.omitted_names)
        omitted: str | list[str] = joined
        if self.omitted_names and joined.count("\n") != len(self.omitted_names) - 1:
            omitted = list(self.omitted_names)
        return json.dumps({
            "text": self.text, "format": self.format, "max_chars": self.max_chars,
            "ranked_by": self.ranked_by, "entries": [e.as_dict() for e in self.entries],
            "omitted": omitted, "omitted_reasons": runs})

    @classmethod
    def from_cache(cls, payload: str) -> Catalog:
        data: dict[str, Any] = json.loads(payload)
        stored = data["omitted"]
        names = (tuple(stored) if isinstance(stored, list)
                 else tuple(stored.split("\n")) if stored else ())
        reasons = tuple(chain.from_iterable(repeat(reason, count)
                                            for reason, count in data["omitted_reasons"]))
        return cls(data["text"], data["format"], data["max_chars"],
                   tuple(map(CatalogEntry.of_dict, data["entries"])), names, reasons,
                   data["ranked_by"])


def budget(max_chars: int | None = None, context_window: int | None = None) -> int:
    """An explicit limit, else 2% of the context window at 4 characters a token, else 8,000."""
    if max_chars is not None:
        if max_chars < 0:
            raise ValueError("max_chars must not be negative")
        return max_chars
    if context_window is not None:
        if context_window <= 0:
            raise ValueError("context_window must be positive")
        return int(context_window * WINDOW_SHARE * CHARS_PER_TOKEN)
    return DEFAULT_MAX_CHARS


class _Renderer:
    """Exact text of a catalog, and the exact length of each part, for one format."""

    def __init__(self, fmt: Format) -> None:
        self.fmt = fmt

    def entry(self, entry: CatalogEntry) -> str:
        # Descriptions arrive folded to one line (`build` folds them once). Every field is
        # escaped here, so budgets are measured on the escaped text; a name or location keeps a
        # line break visible as `\n` rather than folding it, since it is a different path.
        if self.fmt == "xml":
            description = (f"<description>{escape.xml(entry.description)}</description>"
                           if entry.description else "")
            return (f"<skill><name>{escape.xml(entry.name)}</name>{description}"
                    f"<location>{escape.xml(entry.location)}</location></skill>\n")
        if self.fmt == "markdown":
            description = f"{escape.markdown(entry.description)}\n" if entry.description else ""
            return (f"## {escape.markdown(entry.name)}\n{description}"
                    f"Location: {escape.markdown(entry.location)}\n\n")
        fields = {"name": entry.name, "location": entry.location}
        if entry.description:
            fields["description"] = entry.description
        return escape.json_safe(json.dumps(fields, ensure_ascii=False))

    def frame(self) -> tuple[str, str, str]:
        """Text before the entries, between two entries, after the entries."""
        if self.fmt == "xml":
            return "<available_skills>\n", "", "</available_skills>\n"
        if self.fmt == "markdown":
            return "# Skills\n\n", "", ""
        return '{"skills": [', ", ", "]}"

    def render(self, entries: Sequence[CatalogEntry]) -> str:
        return self.joined([self.entry(e) for e in entries])

    def joined(self, texts: Sequence[str]) -> str:
        """The catalog of these rendered entries (none is the empty text)."""
        if not texts:
            return ""
        head, between, tail = self.frame()
        return head + between.join(texts) + tail

    def hinted(self, texts: Sequence[str], left_out: int, finder: str) -> str:
        """The catalog of these entries ending with the line that says how many skills it
        leaves out and what finds them: an XML comment after the element (the text stays
        well-formed), a last line of Markdown, two last keys of the JSON object."""
        sentence = (f"{left_out:,} more {'skill is' if left_out == 1 else 'skills are'} not "
                    f"listed here; {finder} finds them by what they do.")
        head, between, tail = self.frame()
        listed = head + between.join(texts)
        if self.fmt == "xml":
            return f"{listed}{tail}<!-- {sentence.replace('--', '- -')} -->\n"
        if self.fmt == "markdown":
            return f"{listed}{tail}{escape.markdown(sentence)}\n"
        return (f'{listed}], "not_listed": {left_out}, '
                f'"search": {escape.json_safe(json.dumps(sentence, ensure_ascii=False))}}}')


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + ELLIPSIS


def _rendered_length(text: str, fmt: Format) -> int:
    if fmt == "xml":
        return len(escape.xml(text))
    if fmt == "markdown":
        return len(escape.markdown(text))
    return len(escape.json_safe(json.dumps(text, ensure_ascii=False))) - 2


def capped(text: str, limit: int, fmt: Format) -> str:
    """The folded text cut (with an ellipsis) to the longest prefix whose rendering in `fmt`
    takes at most `limit` characters: a per-skill cap counted as the model reads it."""
    text = escape.fold(text)
    if _rendered_length(text, fmt) <= limit:
        return text
    low, high = 0, min(len(text), limit)  # escaping never shortens text
    while low < high:
        middle = (low + high + 1) // 2
        if _rendered_length(_shorten(text, middle), fmt) <= limit:
            low = middle
        else:
            high = middle - 1
    return _shorten(text, low) if low else ""


def _folded(items: Sequence[CatalogItem]) -> list[CatalogItem]:
    # Descriptions are folded to one line once, here; everything after works on folded text
    # and on a settled `described`. A names-only skill has no description to show.
    folded = []
    for item in items:
        text = "" if item.mode == NAMES_ONLY else escape.fold(item.description)
        described = (bool(text) if item.described is None
                     else item.described and item.mode != NAMES_ONLY)
        folded.append(CatalogItem(item.name, text, item.location, item.mode, described,
                                  item.why, item.rank))
    return folded


def describable(items: Iterable[tuple[str, str]], *, max_chars: int, fmt: Format) -> int:
    """How many of the first (name, location) items a catalog could show a description for:
    the longest run whose names-only entries fit in `max_chars`, since a description only
    lengthens an entry. Past it, `build` and `build_ranked` show names only or nothing, pinned
    skills excepted; so the descriptions of 100,000 skills need not be read for 100 shown."""
    renderer = _Renderer(fmt)
    names_only = (CatalogEntry(name, "", location) for name, location in items)
    return sum(1 for _ in takewhile(lambda size: size <= max_chars,
                                    _sizes(renderer, names_only)))


def build(items: Sequence[CatalogItem], *, max_chars: int, fmt: Format,
          ranked_by: str = "precedence", hint: SearchHint | None = None,
          beyond: Tail = NO_TAIL) -> Catalog:
    """Everything in full if it fits; else descriptions shortened evenly; else names only.
    Pinned skills keep their descriptions whole throughout. With a `hint`, a catalog that
    leaves skills out ends with the line saying so (within the budget), as it does when
    items lie `beyond` (see `Tail`)."""
    renderer = _Renderer(fmt)
    folded = _folded(items)

    def made(chars: int) -> Catalog:
        whole = _rendered_within(renderer, (CatalogEntry(i.name, i.description, i.location,
                                                         why=i.why) for i in folded), chars)
        if whole is not None:
            _spent(renderer, beyond, chars)
            return Catalog(whole[0], fmt, chars, _costed(renderer, whole[1]),
                           ranked_by=ranked_by)
        # Reasons name the whole budget, though the hint's line may take some of it.
        shortened = _shortened(renderer, folded, chars, max_chars)
        if shortened is not None:
            _spent(renderer, beyond, chars)
            return _finished(renderer, shortened, chars, fmt, ranked_by)
        return _names_only(renderer, folded, chars, fmt, ranked_by, max_chars, beyond)

    return _hinted(made, renderer, len(folded) + len(beyond.names), max_chars, hint)


def _spent(renderer: _Renderer, beyond: Tail, room: int) -> None:
    """Raise `Unspent` at the first item `beyond` whose entry might fit in `room` characters
    (escaping never shortens a name or a location)."""
    if not beyond.names:
        return
    bound = room - len(renderer.entry(CatalogEntry("", "", "")))
    sizes = list(map(operator.add, map(len, beyond.names), map(len, beyond.locations)))
    if min(sizes) <= bound:  # rare: else no item beyond needs a look
        raise Unspent(next(number for number, size in enumerate(sizes) if size <= bound))


def build_ranked(items: Sequence[CatalogItem], *, max_chars: int, fmt: Format,
                 hint: SearchHint | None = None, beyond: Tail = NO_TAIL) -> Catalog:
    """Relevance first: items arrive best first (pinned before them); each keeps its full
    description while it fits, then names only from the first that does not, then the rest
    is omitted and reported, each with its rank. With a `hint` or items `beyond`, as `build`."""
    renderer = _Renderer(fmt)
    folded = _folded(items)

    def made(chars: int) -> Catalog:
        head, between, tail = renderer.frame()
        used = len(head) + len(tail)
        kept: list[CatalogEntry] = []
        omitted: list[str] = []
        reasons: list[str] = []
        in_full = True
        smallest = _smallest(renderer)
        for item in folded:
            if used + smallest > chars:  # nothing more fits: no need to render the rest
                omitted.append(item.name)
                reasons.append(f"{_ranked(item)}: does not fit in {max_chars} characters")
                continue
            options = []
            if in_full or item.mode == PINNED:
                options.append(CatalogEntry(item.name, item.description, item.location,
                                            why=item.why))
            why = item.why or (f"{_ranked(item)}: names only once better matches filled "
                               f"{max_chars} characters" if item.described else "")
            options.append(CatalogEntry(item.name, "", item.location,
                                        truncated=bool(item.described), why=why))
            for number, entry in enumerate(options):
                cost = len(renderer.entry(entry)) + (len(between) if kept else 0)
                if used + cost <= chars:
                    kept.append(entry)
                    used += cost
                    if number and item.mode != PINNED:
                        in_full = False
                    break
            else:
                in_full = False
                omitted.append(item.name)
                reasons.append(f"{_ranked(item)}: does not fit in {max_chars} characters")
        _spent(renderer, beyond, chars - used - (len(between) if kept else 0))
        omitted.extend(beyond.names)
        reasons.extend(f"{_ranked_as(rank)}: does not fit in {max_chars} characters"
                       for rank in beyond.ranks)
        return _finished(renderer, kept, chars, fmt, "query", omitted, reasons)

    return _hinted(made, renderer, len(folded) + len(beyond.names), max_chars, hint)


def _smallest(renderer: _Renderer) -> int:
    """What the shortest entry could cost: empty name and location, after another entry."""
    return len(renderer.entry(CatalogEntry("", "", ""))) + len(renderer.frame()[1])


def _ranked(item: CatalogItem) -> str:
    return _ranked_as(item.rank)


def _ranked_as(rank: int | None) -> str:
    return "no match for the query" if rank is None else f"query rank {rank}"


def _costed(renderer: _Renderer, entries: Iterable[CatalogEntry]) -> tuple[CatalogEntry, ...]:
    return tuple(replace(entry, chars=len(renderer.entry(entry))) for entry in entries)


def _finished(renderer: _Renderer, kept: Sequence[CatalogEntry], max_chars: int, fmt: Format,
              ranked_by: str, omitted: Sequence[str] = (),
              reasons: Sequence[str] = ()) -> Catalog:
    """The catalog of these entries, each with its cost in characters."""
    entries = _costed(renderer, kept)
    return Catalog(renderer.render(entries), fmt, max_chars, entries, tuple(omitted),
                   tuple(reasons), ranked_by)


def _hinted(made: Callable[[int], Catalog], renderer: _Renderer, count: int, max_chars: int,
            hint: SearchHint | None) -> Catalog:
    """`made(max_chars)`, or, when that leaves skills out and a hint is asked for, the catalog
    made within what the hint's line leaves of the budget, ending with that line."""
    catalog = made(max_chars)
    if hint is None or not (catalog.omitted_names or hint.elsewhere):
        return catalog
    # The line at its longest: every item and every skill elsewhere left out.
    line = (len(renderer.hinted([], count + hint.elsewhere, hint.finder))
            - len(renderer.joined([""])))
    if line > max_chars:
        return catalog
    within = made(max_chars - line)
    text = renderer.hinted([renderer.entry(entry) for entry in within.entries],
                           len(within.omitted_names) + hint.elsewhere, hint.finder)
    if len(text) > max_chars:  # nothing fits beside the line but the line itself
        return catalog
    return replace(within, text=text, max_chars=max_chars)


def _with_cap(items: Iterable[CatalogItem], cap: int, budget: int = 0,
              ) -> Iterator[CatalogEntry]:
    for item in items:
        description = item.description if item.mode == PINNED else _shorten(item.description,
                                                                             cap)
        truncated = description != item.description
        why = item.why or (f"budget: every description cut to {cap} characters to fit "
                           f"{budget}" if truncated else "")
        yield CatalogEntry(item.name, description, item.location, truncated=truncated, why=why)


def _measured(renderer: _Renderer, entries: Iterable[CatalogEntry],
              ) -> Iterator[tuple[CatalogEntry, str, int]]:
    """Each entry, its text, and the length of the catalog of it and the entries before it:
    summed as the entries come, so a caller may stop once over its budget without rendering
    the rest."""
    head, between, tail = renderer.frame()
    used = len(head) + len(tail) - len(between)
    for entry in entries:
        text = renderer.entry(entry)
        used += len(between) + len(text)
        yield entry, text, used


def _sizes(renderer: _Renderer, entries: Iterable[CatalogEntry]) -> Iterator[int]:
    """The length of the catalog of the first entry, of the first two, and so on."""
    return (used for _entry, _text, used in _measured(renderer, entries))


def _rendered_within(renderer: _Renderer, entries: Iterable[CatalogEntry], max_chars: int,
                     ) -> tuple[str, tuple[CatalogEntry, ...]] | None:
    """The catalog of these entries and the entries, if it fits in `max_chars`, each entry
    rendered once; None as soon as it does not, so that no more entries are made than that."""
    kept: list[CatalogEntry] = []
    texts: list[str] = []
    for entry, text, used in _measured(renderer, entries):
        if used > max_chars:
            return None
        kept.append(entry)
        texts.append(text)
    return renderer.joined(texts), tuple(kept)


def _fits(renderer: _Renderer, entries: Iterable[CatalogEntry], max_chars: int) -> bool:
    """Whether the rendered entries fit (no entries render as nothing, which always fits)."""
    return all(size <= max_chars for size in _sizes(renderer, entries))


def _shortened(renderer: _Renderer, items: Sequence[CatalogItem], max_chars: int,
               budget: int) -> list[CatalogEntry] | None:
    """The largest equal cap on every description that fits, or None when even the least fails."""
    longest = max((len(i.description) for i in items if i.mode != PINNED), default=0)
    low, high = MIN_DESCRIPTION, longest - 1
    if high < low or not _fits(renderer, _with_cap(items, low), max_chars):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if _fits(renderer, _with_cap(items, middle), max_chars):
            low = middle
        else:
            high = middle - 1
    return list(_with_cap(items, low, budget))


def _names_only(renderer: _Renderer, items: Sequence[CatalogItem], max_chars: int,
                fmt: Format, ranked_by: str, budget: int, beyond: Tail) -> Catalog:
    head, between, tail = renderer.frame()
    used = len(head) + len(tail)
    kept: list[CatalogEntry] = []
    omitted: list[str] = []
    budgeted = (f"budget: names only, since descriptions of {MIN_DESCRIPTION} characters do "
                f"not fit in {budget}")
    smallest = _smallest(renderer)
    for item in items:
        if used + smallest > max_chars:  # nothing more fits: no need to render the rest
            omitted.append(item.name)
            continue
        options = [CatalogEntry(item.name, "", item.location, truncated=bool(item.described),
                                why=item.why or (budgeted if item.described else ""))]
        if item.mode == PINNED:
            options.insert(0, CatalogEntry(item.name, item.description, item.location))
        for entry in options:
            cost = len(renderer.entry(entry)) + (len(between) if kept else 0)
            if used + cost <= max_chars:
                kept.append(entry)
                used += cost
                break
        else:
            omitted.append(item.name)
    _spent(renderer, beyond, max_chars - used - (len(between) if kept else 0))
    omitted.extend(beyond.names)
    reasons = (f"does not fit in {budget} characters",) * len(omitted)
    return _finished(renderer, kept, max_chars, fmt, ranked_by, omitted, reasons)


def empty(items: Sequence[CatalogItem], *, max_chars: int, fmt: Format, reason: str,
          ranked_by: str = "precedence", beyond: Tail = NO_TAIL) -> Catalog:
    """No catalog at all (no read tool, or skills switched off), saying why for each skill."""
    names = (*(i.name for i in items), *beyond.names)
    return Catalog("", fmt, max_chars, (), names, (reason,) * len(names), ranked_by)


def with_omitted(catalog: Catalog, names: Sequence[str], reasons: Sequence[str]) -> Catalog:
    """The catalog, also reporting skills left out before budgeting (manual-only ones)."""
    if not names:
        return catalog
    return replace(catalog, omitted_names=(*names, *catalog.omitted_names),
                   omitted_reasons=(*reasons, *catalog.omitted_reasons))
