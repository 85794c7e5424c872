"""Renders a report as one self-contained HTML page: inline style and SVG, no script, nothing
fetched; every text from skills or the log escaped by `text.html`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from skillindex import __version__
from skillindex.index.codes import explained
from skillindex.index.signing import SIGNATURE_FILE
from skillindex.model import AuditEvent, UsageDay
from skillindex.query.report import Report, by_skill
from skillindex.text import html as esc

# The page may load nothing at all: no script, font, image or frame, from anywhere.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
:root { color-scheme: light; --ink: #1d2430; --muted: #5b6676; --line: #d9dee5;
  --load: #2f6fbf; --fail: #c4472d; --ok: #2e7d32; --bad: #b3261e; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 24px; color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; }
p.meta, .muted { color: var(--muted); }
nav a { margin-right: 12px; color: var(--load); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr));
  gap: 10px; margin: 16px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.card .figure { display: block; font-size: 22px; font-weight: 600; }
.card .label { color: var(--muted); }
.card.bad .figure { color: var(--bad); } .card.good .figure { color: var(--ok); }
table { border-collapse: collapse; width: 100%; margin: 8px 0; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; overflow-wrap: break-word; hyphens: none; }
th { background: #f3f5f8; font-weight: 600; overflow-wrap: normal; white-space: nowrap; }
td.n, th.n { text-align: right; }
code { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere;
  background: #f3f5f8; border-radius: 3px; padding: 0 3px; }
td code.path { display: inline-block; }
ul.names { columns: 4 180px; margin: 8px 0; padding-left: 18px; }
.status-ok { color: var(--ok); font-weight: 600; } .status-bad { color: var(--bad);
  font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg .load { fill: var(--load); } svg .fail { fill: var(--fail); }
svg .grid { stroke: var(--line); }
"""


def render(report: Report) -> str:
    """The whole page."""
    usage = report.usage
    totals = usage.totals()
    chain_ok = report.chain.ok
    cards = [
        ("catalog-skills", usage.catalog_skills, "catalog skills", None),
        ("candidates", report.candidates, "candidates", None),
        ("rejected", report.rejected, "rejected", None),
        ("collisions", len(report.collisions), "names in collision", None),
        ("loads", totals["loads"], "loads in the window", None),
        ("never-used", totals["never_loaded"], "never used in the window",
         "bad" if totals["never_loaded"] else "good"),
        ("failed", totals["failed"], "refused or failed attempts",
         "bad" if totals["failed"] else "good"),
        ("risk-findings", len(report.risks), "risk findings",
         "bad" if report.risks else "good"),
        ("quarantined", len(report.quarantined), "quarantined", None),
        ("drift", "-" if report.verify is None else report.verify.drifted,
         "files drifted at the last verify",
         None if report.verify is None else "good" if report.verify.ok else "bad"),
        ("audit-events", report.chain.events, "audit events verified",
         "good" if chain_ok else "bad"),
    ]
    body = [
        "<header>",
        "<h1>skillindex report</h1>",
        f'<p class="meta">index <b>{esc(report.index)}</b> · generated {_when(report.generated)}'
        f" UTC · usage from {_when(usage.since)} to {_when(usage.until)} UTC · skillindex "
        f"{esc(__version__)}</p>",
        "</header>",
        '<nav aria-label="sections">' + "".join(
            f'<a href="#{anchor}">{title}</a>' for anchor, title in SECTIONS) + "</nav>",
        '<section id="summary" class="cards">' + "".join(
            f'<div class="card{" " + tone if tone else ""}"><span class="figure" '
            f'data-figure="{key}">{esc(value)}</span><span class="label">{label}</span></div>'
            for key, value, label, tone in cards) + "</section>",
        _roots(report), _collisions(report), _rejections(report), _warnings(report),
        _risks(report),
        _trust(report), _usage(report), _never(report), _failed(report), _verify(report),
        _chain(report),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>skillindex report: {esc(report.index)}</title>\n"
            f"<style>{STYLE}</style>\n</head>\n<body>\n" + "\n".join(body)
            + "\n</body>\n</html>\n")


SECTIONS = (("roots", "Roots"), ("collisions", "Collisions"), ("rejections", "Rejections"),
            ("warnings", "Warnings"), ("risks", "Risks"), ("trust", "Trust"), ("usage", "Usage"),
            ("never-used", "Never used"), ("refused", "Refused"), ("verify", "Verify"),
            ("audit", "Audit chain"))


# More never-used names than this are folded under a summary line.
NEVER_SHOWN_OPEN = 60


def _when(value: datetime | None) -> str:
    return "-" if value is None else esc(value.strftime("%Y-%m-%d %H:%M"))


# Larger figures are drawn and compared as this: a float holds it, a bar cannot show more.
_LARGEST = 2 ** 63


def _amount(value: object) -> int | float:
    """A figure from the store as a number to draw or compare. A SQLite column holds a value
    of any type whatever its declared one, so anything but a count (text, a negative or
    non-finite number) is drawn as 0; the page prints the value itself, escaped."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return min(max(value, 0), _LARGEST)


class Markup(str):
    """Text already made into HTML from escaped parts: a cell that is not escaped again."""

    __slots__ = ()


def _cell(value: object) -> str:
    return value if isinstance(value, Markup) else esc(value)


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def prose(text: str) -> Markup:
    """Escaped text whose `backticked` spans are shown as code, as the docs show them."""
    return Markup(_CODE_SPAN.sub(r"<code>\1</code>", esc(text)))


def path(value: object) -> Markup:
    """A path: code, the one text a line may break anywhere in (a path has no words)."""
    return Markup(f'<code class="path">{esc(value)}</code>')


def paths(values: Iterable[object]) -> Markup:
    return Markup("<br>".join(map(path, values)))


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], *,
           numeric: Iterable[int] = (), empty: str = "none") -> str:
    """A table of escaped cells (a Markup cell as it is); `numeric` columns right-aligned."""
    right = set(numeric)
    cells = [
        "<tr>" + "".join(f'<td class="n">{_cell(cell)}</td>' if number in right
                         else f"<td>{_cell(cell)}</td>" for number, cell in enumerate(row))
        + "</tr>" for row in rows]
    if not cells:
        return f'<p class="muted">{prose(empty)}</p>'
    head = "".join(f'<th class="n">{esc(h)}</th>' if n in right else f"<th>{esc(h)}</th>"
                   for n, h in enumerate(headers))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(cells)}</tbody></table>"


def _count(number: object, noun: str) -> str:
    """`1 file`, `2 files`; a figure of the wrong type from the store as it is, with the plural."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _section(anchor: str, title: str, *parts: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{"".join(parts)}</section>'


def _roots(report: Report) -> str:
    rows = [[path(root.spec.path), str(root.spec.scope), root.spec.provider,
             root.spec.precedence, "yes" if root.present else "no", root.candidates,
             root.rejected, len(root.problems)] for root in report.roots]
    return _section("roots", "Roots and their counts", _table(
        ["root", "scope", "provider", "precedence", "present", "candidates", "rejected",
         "problems"], rows, numeric=(3, 5, 6, 7), empty="no root applies here"))


def _collisions(report: Report) -> str:
    rows = [[c.name, c.policy, paths(c.kept) if c.kept else "none (refused)", paths(c.paths)]
            for c in report.collisions]
    return _section("collisions", "Collisions and who wins", _table(
        ["name", "policy", "kept", "declared by"], rows, empty="no name is declared twice"))


def _rejections(report: Report) -> str:
    rows = [[count.code, count.candidates] for count in report.rejections]
    return _section("rejections", "Rejections by code", _table(
        ["code", "candidates"], rows, numeric=(1,), empty="no candidate was rejected"))


def _warnings(report: Report) -> str:
    rows = [[count.code, explained(count.code).title, count.candidates,
             ", ".join(names) + (", …" if len(names) < count.candidates else "")]
            for count, names in report.warnings]
    return _section("warnings", "Warnings on accepted skills", _table(
        ["code", "what it means", "skills", "which"], rows, numeric=(2,),
        empty="no accepted skill carries a warning"))


def _risks(report: Report) -> str:
    codes = _table(["code", "severity", "skills"],
                   [[c.code, str(c.severity), c.candidates] for c in report.risk_counts],
                   numeric=(2,), empty="no risk finding")
    skills = _table(
        ["skill", "findings", "codes", "where"],
        [[name, len(found), ", ".join(sorted({f.code for f in found})),
          paths(sorted({f"{f.path}:{f.line}" if f.line else str(f.path) for f in found}))]
         for name, found in by_skill(report.risks)], numeric=(1,), empty="")
    return _section("risks", "Risk findings by severity and skill", codes, skills)


def _trust(report: Report) -> str:
    held = _table(["quarantined skill", "SKILL.md", "why"],
                  [[h.name, path(h.path), prose(h.reason)] for h in report.quarantined],
                  empty="no skill is quarantined")
    trusted = _table(["trusted skill", "approved content", "approved", "note"],
                     [[a.name, a.digest[:16], a.approved_at.strftime("%Y-%m-%d %H:%M"),
                       a.note or ""] for a in report.approvals],
                     empty="no skill was approved with `skillindex trust`")
    signed = _table(["signed skill", "signer"], report.signers,
                    empty=f"no skill's {SIGNATURE_FILE} was verified")
    return _section("trust", "Quarantined, trusted and signed skills", held, trusted, signed)


def _usage(report: Report) -> str:
    rows = [[row.name + ("" if row.in_catalog else " (not in the catalog)"), row.loads,
             row.body_loads, row.resource_loads, row.bytes, row.sessions,
             row.first_load.strftime("%Y-%m-%d %H:%M") if row.first_load else "-",
             row.last_load.strftime("%Y-%m-%d %H:%M") if row.last_load else "-", row.failed]
            for row in report.usage.skills]
    return _section(
        "usage", "Usage over time", chart(report.usage.days),
        _table(["skill", "loads", "bodies", "files", "bytes", "sessions", "first load",
                "last load", "failed"], rows, numeric=(1, 2, 3, 4, 5, 8),
               empty="no skill was loaded in this window"))


def _never(report: Report) -> str:
    names = report.usage.never_loaded
    listed = ("<ul class=\"names\">" + "".join(f"<li>{esc(name)}</li>" for name in names)
              + "</ul>") if names else '<p class="muted">every catalog skill was loaded</p>'
    if len(names) > NEVER_SHOWN_OPEN:  # a registry's idle names: folded, so the page stays short
        listed = f"<details><summary>the {len(names)} names</summary>{listed}</details>"
    return _section("never-used", f"Never used in the window ({len(names)} of "
                    f"{report.usage.catalog_skills})", listed)  # _section escapes the title


def _failed(report: Report) -> str:
    totals = report.usage.totals()
    counts = _table(["outcome", "attempts"],
                    [[name.replace("_", "-"), totals[name]]
                     for name in ("refused", "mismatch", "missing", "not_found", "error")],
                    numeric=(1,))
    shown = len(report.failed)
    held = {h.name for h in report.quarantined}
    events = _table(
        ["id", "time", "outcome", "why", "skill", "resource", "session", "caller's reason"],
        [[e.id, e.event.time.strftime("%Y-%m-%d %H:%M:%S"), e.event.outcome,
          prose(why_failed(e.event, held)), e.event.skill or "-",
          path(e.event.resource) if e.event.resource else "-", e.event.session or "-",
          e.event.reason or ""] for e in report.failed], numeric=(0,),
        empty="no attempt failed in this window")
    note = (f'<p class="muted">the latest {shown} of {esc(totals["failed"])}</p>'
            if shown < _amount(totals["failed"]) else "")
    return _section("refused", "Refused and failed attempts", counts, events, note)


NO_VERIFY = ("no verify of these roots was recorded: run `skillindex verify` or "
             "`skillindex report --verify`")


# What each failed outcome means, as docs/audit.md defines it: the row keeps the outcome and
# the caller's reason, not a message, so the page says what the outcome stands for.
FAILED_MEANS = {
    "refused": "refused: a path outside the skill or one the rules do not serve, or a skill "
               "held back (quarantined, manual-only, switched off)",
    "mismatch": "the file's bytes are not those the last reindex recorded",
    "missing": "the file was removed after the last reindex",
    "not-found": "no skill or file of that name in the index",
    "error": "the file could not be read",
}


def why_failed(event: AuditEvent, held: set[str]) -> str:
    """Why an attempt failed, as near as its row tells."""
    reason = event.reason or ""
    resource = event.resource or ""
    if event.outcome == "refused":
        if reason.endswith("without a valid token"):
            return "refused: the request carried no valid token"
        if event.skill in held:
            return "refused: the skill is quarantined until approved (`skillindex trust`)"
        if ".." in resource.split("/") or resource.startswith("/"):
            return "refused: the path leaves the skill's folder"
    return FAILED_MEANS.get(event.outcome, event.outcome)


def _verify(report: Report) -> str:
    record = report.verify
    if record is None:
        return _section("verify", "Drift since the last verify", (
            f'<p class="muted">{prose(NO_VERIFY)}</p>'))
    state = ('<span class="status-ok">no drift</span>' if record.ok else
             f'<span class="status-bad">{esc(_count(record.drifted, "file"))} drifted</span>')
    when = "run for this report" if report.verified_now else "recorded"
    summary = (f"<p>{state}: {esc(_count(record.files, 'file'))} of "
               f"{esc(_count(record.skills, 'skill'))} hashed "
               f"{_when(record.time)} UTC ({when}, from {esc(record.cwd)})</p>")
    rows = [[item.skill, str(item.problem), path(item.resource)] for item in record.drift]
    more = (f'<p class="muted">the first {len(rows)} of {esc(record.drifted)}</p>'
            if len(rows) < _amount(record.drifted) else "")
    return _section("verify", "Drift since the last verify", summary,
                    _table(["skill", "problem", "file"], rows, empty=""), more)


def _chain(report: Report) -> str:
    chain = report.chain
    checked = (f"every event was hashed again for this page, in "
               f"{_amount(report.chain_seconds):.1f} s")
    if chain.broken is not None:
        state = (f'<p><span class="status-bad">broken</span> at event {esc(chain.broken.id)} '
                 f"({esc(chain.broken.time)}): {esc(chain.broken.problem)}; "
                 f"{esc(chain.events)} events before it verify; {checked}.</p>")
    else:
        verdict = ('<span class="status-ok">intact</span>' if chain.ok else
                   '<span class="status-bad">not ok</span>')
        state = (f"<p>{verdict}: {esc(chain.events)} events of index {esc(chain.index)} link up "
                 f"to the head below; {checked}.</p>")
    if chain.lost is not None:
        anchors = (f'<p><span class="status-bad">anchor lost</span>: run '
                   f"{esc(chain.lost.anchor.run)} ({esc(chain.lost.anchor.time)}): "
                   f"{esc(chain.lost.problem)}</p>")
    elif chain.anchors:
        anchors = (f"<p>anchors: the chain reaches all {esc(chain.anchors)} its reindexes "
                   f"recorded; the newest covers the first {esc(chain.anchored)} events</p>")
    else:
        anchors = "<p>anchors: none yet (each reindex records one)</p>"
    tail = ("" if not chain.unproven else
            f"that none of the {esc(chain.unproven)} events after the newest anchor was removed "
            "from the end, nor ")
    unproven = ("" if not chain.ok else
                f'<p class="muted">not proven here: {tail}that the log was not rewritten '
                "together with its anchors</p>")
    return _section("audit", "The audit chain", state, anchors,
                    f'<p>head hash: <code data-figure="head">{esc(chain.head)}</code></p>',
                    unproven,
                    f'<p class="muted">{prose(PUBLISH_HEAD)}</p>')


PUBLISH_HEAD = ("publish the head hash elsewhere; `skillindex audit verify --head HASH` later "
                "shows the history up to it was not rewritten")


def chart(days: Sequence[UsageDay], *, width: int = 760, height: int = 220) -> str:
    """Loads and failed attempts per day as bars, drawn from the figures themselves."""
    if not days:
        return ""
    left, right, top, bottom = 44, 8, 12, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = _nice(max(1, *(_amount(d.loads) for d in days), *(_amount(d.failed) for d in days)))
    slot = plot_w / len(days)
    bar = max(slot * 0.42, 0.5)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="100%" '
             f'style="max-width: {width}px" viewBox="0 0 {width} {height}" '
             f'aria-label="loads and failed attempts per day, {esc(days[0].day)} to '
             f'{esc(days[-1].day)}">']
    for fraction in (0, 0.5, 1):
        y = top + plot_h * (1 - fraction)
        label = peak * fraction
        parts.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y:.1f}" '
                     f'y2="{y:.1f}"/><text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{label:g}</text>")
    for number, day in enumerate(days):
        x = left + slot * number
        for offset, value, kind, what in ((0.0, day.loads, "load", "loads"),
                                          (bar, day.failed, "fail", "failed attempts")):
            h = plot_h * _amount(value) / peak
            parts.append(f'<rect class="{kind}" x="{x + offset:.1f}" y="{top + plot_h - h:.1f}" '
                         f'width="{bar:.1f}" height="{h:.1f}"><title>{esc(day.day)}: '
                         f"{esc(value)} {what}</title></rect>")
    for number in sorted({0, len(days) // 2, len(days) - 1}):
        x, anchor = left + slot * number + bar, "middle"
        if number == len(days) - 1 and number:
            x, anchor = width - right, "end"  # the last day's label stays on the page
        elif number == 0:
            x, anchor = left, "start"
        parts.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="{anchor}">'
                     f"{esc(days[number].day)}</text>")
    parts.append(f'<rect class="load" x="{width - 230}" y="2" width="10" height="10"/>'
                 f'<text x="{width - 216}" y="11">loads</text>'
                 f'<rect class="fail" x="{width - 160}" y="2" width="10" height="10"/>'
                 f'<text x="{width - 146}" y="11">failed attempts</text></svg>')
    return "".join(parts)


def _nice(value: int | float) -> int:
    """The smallest of 1, 2 or 5 times a power of ten at or above `value`: a scale read at
    a glance."""
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= value:
                return step * scale
        scale *= 10
