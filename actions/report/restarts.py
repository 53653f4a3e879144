"""The report's restarts: what changed, how it ended, and the before/after at the same load.

Each `restart` action holds the dials before, after and now, the outcome, the downtime, the
verification in words, the before/after (its numbers, and the table in the words `slotop restart`
printed, `slotop.actions.restart.table`'s) and the quality check; a `restart_planned` with no
`restart` after it was refused or cut short. A recording from before the table's words were kept
shows the numbers, each in its unit. A dashboard's restart holds no table of its own: its
before/after is the `before_after` action the panel recorded after it (`live_record`), shown in
the same words; one with no restart before it (a recording without the dashboard's restart
actions) gets a section of its own. A dashboard's quality check follows its restart as a
`restart_quality` action holding the same `quality` object, and is shown as `slotop restart`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slotop import fmt
from slotop.actions.replica.spec import Dials
from slotop.actions.report.markdown import code_block, offset
from slotop.actions.report.markdown import table as markdown_table
from slotop.actions.restart.live_record import ACTION as PANEL_ACTION
from slotop.actions.restart.recorded import QUALITY_ACTION
from slotop.actions.restart.table import format_value
from slotop.actions.session.reader import Recording, SessionLine


def _changes(data: Mapping[str, Any]) -> str:
    before = Dials.from_json(data.get("dials_before") or {})
    after = Dials.from_json(data.get("dials_after") or {})
    changes = before.changes(after)
    if not changes:
        return "no dial changed"
    return ", ".join(f"{name} {old} → {new}" for name, old, new in changes)


def _side(side: Mapping[str, Any] | None) -> str:
    if not side:
        return fmt.NA
    flags = " ".join(f"{k}={v}" for k, v in (side.get("flags") or {}).items())
    return f"{side.get('label', '')} ({flags})" if flags else str(side.get("label", ""))


def recorded_table(table: Mapping[str, Any]) -> list[str]:
    """The before/after table in the words `slotop restart` printed (the action's `table`)."""
    header = [str(h) for h in table.get("header") or ()]
    rows = [[str(c) for c in row] for row in table.get("rows") or ()]
    lines = [f"- {side.strip()}" for side in table.get("sides") or ()]
    lines += ["", *markdown_table(header, rows, "l" + "r" * (len(header) - 2) + "l"), ""]
    lines += [f"- {item}" for item in _footer_items(table.get("footer") or ())]
    return lines


def _footer_items(footer: Sequence[object]) -> list[str]:
    """The table's notes, one item each: an indented line goes on the note above it, as the
    terminal wrapped it, instead of becoming an item of its own."""
    items: list[str] = []
    for line in (str(line) for line in footer):
        if items and line[:1].isspace():
            items[-1] = f"{items[-1]} {line.strip()}"
        else:
            items.append(line.strip())
    return items


def comparison_rows(comparison: Mapping[str, Any]) -> list[str]:
    """A before/after from a recording that holds only its numbers: each metric in its unit."""
    rows = []
    for row in comparison.get("rows") or ():
        unit = str(row.get("unit", ""))
        ratio = row.get("ratio")
        rows.append(
            [
                str(row.get("label", row.get("key", "?"))),
                format_value(row.get("before"), unit),
                format_value(row.get("after"), unit),
                fmt.NA if ratio is None else f"×{ratio:.2f}",
                str(row.get("verdict") or fmt.NA),
            ]
        )
    lines = [
        f"- before: {_side(comparison.get('before'))}",
        f"- after: {_side(comparison.get('after'))}",
        "",
        *markdown_table(("metric", "before", "after", "ratio", "verdict"), rows, "lrrrl"),
        "",
    ]
    return lines + [f"- note: {note}" for note in comparison.get("notes") or ()]


def _quality(quality: Mapping[str, Any]) -> list[str]:
    if quality.get("not_run"):
        return [f"Quality check: not run: {quality['not_run']}."]
    total = quality.get("prompts_total")
    drift = quality.get("logprob_drift_mean")
    rows = [
        ("identical outputs", f"{quality.get('prompts_identical')} of {total}"),
        (
            "tokens identical to the first divergence",
            fmt.percent(quality.get("prefix_match_ratio")),
        ),
        ("tokens identical position-wise", fmt.percent(quality.get("position_match_ratio"))),
        ("mean log-prob drift", fmt.NA if drift is None else f"{drift:+.4f}"),
    ]
    kind = quality.get("token_kind")
    lines = [f"Quality check ({total} greedy prompts before and after; tokens as {kind}):", ""]
    return lines + markdown_table(("measure", "value"), rows)


def panel_section(panel: SessionLine, start_s: float) -> list[str]:
    """The dashboard's before/after as its panel last showed it: the table when measured, else
    why there is none."""
    data = panel.data
    state = data.get("state")
    table = data.get("table")
    when = offset(panel.t_s, start_s)
    if isinstance(table, Mapping):
        lines = [f"Before/after at {data.get('load', '?')} (the dashboard's panel, {when}):", ""]
        lines += recorded_table(table)
        if data.get("stopped"):
            lines += ["", f"The measure stopped early: {data['stopped']}."]
        return [*lines, ""]
    if state == "stopped":
        return [f"No before/after table: {data.get('stopped')} ({when}).", ""]
    return [
        f"No before/after table: the dashboard's panel had {data.get('requests')} of "
        f"{data.get('wanted')} requests with the new dials when it was hidden or the session "
        f"ended ({when}).",
        "",
    ]


def restart_section(
    number: int,
    line: SessionLine,
    planned: SessionLine | None,
    start_s: float,
    panel: SessionLine | None = None,
    checked: SessionLine | None = None,
) -> list[str]:
    """One restart: its change, outcome and downtime, verification, before/after and quality
    (the dashboard's `panel` when the restart holds no table of its own, and its `checked`
    quality when the restart holds no check of its own)."""
    data = line.data
    when = offset(planned.t_s if planned is not None else line.t_s, start_s)
    lines = [f"### Restart {number}: {_changes(data)}", ""]
    outcome = str(data.get("outcome", "?")).replace("_", " ")
    downtime = data.get("downtime_s")
    lines.append(
        f"Planned at {when} ({data.get('how', '?')}); outcome: **{outcome}**; downtime "
        f"{fmt.fixed(downtime, '.1f', ' s')}; the replica runs "
        f"{' '.join(Dials.from_json(data['dials_now']).flag_args()) if data.get('dials_now') else 'unknown dials'} "
        "since."
    )
    if data.get("failure"):
        lines.append(f"Reason: {data['failure']}")
    lines.append("")
    lines += code_block([str(text) for text in data.get("lines") or ()])
    lines.append("")
    comparison = data.get("comparison")
    recorded = data.get("table")
    if isinstance(recorded, Mapping) or isinstance(comparison, Mapping):
        lines += ["Before/after at the same load:", ""]
        if isinstance(recorded, Mapping):
            lines += recorded_table(recorded)
        elif isinstance(comparison, Mapping):
            lines += comparison_rows(comparison)
        lines.append("")
    elif panel is not None:
        lines += panel_section(panel, start_s)
    else:
        lines.append(
            "No before/after table: the restart ran without load (`slotop restart "
            "--concurrency N` measures the same load before and after)."
        )
        lines.append("")
    quality = data.get("quality")
    if not isinstance(quality, Mapping) and checked is not None:
        quality = checked.data.get("quality")
    if isinstance(quality, Mapping):
        lines += _quality(quality)
        lines.append("")
    return lines


def restarts_section(recording: Recording) -> list[str]:
    """Every restart of the session, and any planned restart that never ran."""
    start = recording.header.started_at_s
    planned: SessionLine | None = None
    done: list[tuple[SessionLine, SessionLine | None]] = []
    panels: dict[int, SessionLine] = {}
    checks: dict[int, SessionLine] = {}
    alone: list[SessionLine] = []
    unanswered: list[SessionLine] = []
    for line in recording.of_kind("action"):
        action = line.data.get("action")
        if action == "restart_planned":
            if planned is not None:
                unanswered.append(planned)
            planned = line
        elif action == "restart":
            done.append((line, planned))
            planned = None
        elif action == PANEL_ACTION and line.data.get("state") not in ("hidden", None):
            if done:
                panels[len(done) - 1] = line  # the latest state the panel showed after it
            elif line.data.get("state") in ("measured", "stopped"):
                alone.append(line)
        elif action == QUALITY_ACTION and done:
            checks[len(done) - 1] = line
    body: list[str] = []
    for index, (line, asked) in enumerate(done):
        body += restart_section(index + 1, line, asked, start, panels.get(index), checks.get(index))
    for line in alone:
        body += [f"### Before/after: {line.data.get('changes', '?')}", ""]
        body += panel_section(line, start)
    if planned is not None:
        unanswered.append(planned)
    for line in unanswered:
        body += [
            f"### Restart planned at {offset(line.t_s, start)}, not done: {_changes(line.data)}",
            "",
            "The operator did not confirm it, or the session ended first (see the events).",
            "",
        ]
    return ["## Restarts", "", *body] if body else []
