"""Present a :class:`~.suite.Report`: a text table and Markdown (one column per model), JSON with
every detail, and a PNG of the headline scores across models (e.g. checkpoints of one run)."""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Optional

from ..io_utils import json_safe
from .results import Score
from .suite import Report
from .tasks import EVALUATION_TASKS

def score_table(report: Report) -> tuple[list[tuple[str, str, str]], dict]:
    """Row keys in first-seen order, and ``{(row key, model name): Score}``."""
    keys: dict[tuple[str, str, str], None] = {}
    cells: dict = {}
    for model in report.models:
        for score in model.scores:
            keys.setdefault(score.key)
            cells[(score.key, model.name)] = score
    return list(keys), cells


def format_value(score: Optional[Score], with_coverage: bool = True) -> str:
    if score is None:
        return "-"
    if score.value is None or math.isnan(score.value):
        text = "n/a"
    else:
        text = f"{score.value:.1f}" if score.metric == "MR" else f"{score.value:.4f}"
    coverage = score.coverage
    if with_coverage and coverage is not None and coverage < 1.0:
        text += f" ({math.floor(100 * coverage)}%)"  # floor: 998/999 must not read as 100%
    return text


def _best_models(keys, cells, names) -> dict:
    """For each row, the names of the models with the best value (only when they differ)."""
    best = {}
    for key in keys:
        scored = [(cells[(key, n)].value, n, cells[(key, n)].higher_is_better) for n in names
                  if (key, n) in cells and not math.isnan(cells[(key, n)].value)]
        if len(scored) < 2 or len({v for v, _, _ in scored}) < 2:
            continue
        sign = 1 if scored[0][2] else -1
        top = max(sign * v for v, _, _ in scored)
        best[key] = {n for v, n, _ in scored if sign * v == top}
    return best


def _grid(report: Report) -> tuple[list[str], list[list[str]], dict]:
    names = [m.name for m in report.models]
    keys, cells = score_table(report)
    header = ["task", "dataset", "metric"] + names
    rows = [[*key] + [format_value(cells.get((key, n))) for n in names] for key in keys]
    return header, rows, _best_models(keys, cells, names)


def format_text(report: Report) -> str:
    header, rows, _ = _grid(report)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    align = lambda row: "  ".join(c.ljust(w) if i < 3 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(row, widths)))
    lines = [align(header), "  ".join("-" * w for w in widths)] + [align(r) for r in rows]
    if any(c.endswith("%)") for row in rows for c in row[3:]):  # issue 48: "(83%)" unexplained
        lines.append(COVERAGE_NOTE)
    lines += _notes(report)
    return "\n".join(lines) + "\n"


COVERAGE_NOTE = ("(N%): the share of the data set's items (pairs, questions, words) found in the "
                 "vocabulary, when below 100%; the score is over those")


def format_markdown(report: Report) -> str:
    header, rows, best = _grid(report)
    names = header[3:]
    lines = ["# Embedding evaluation", ""]
    lines += [f"- **{m.name}**: `{m.source}` ({m.words} words x {m.dimensions} dimensions)" for m in report.models]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * 3 + "---:|" * len(names)]
    for row in rows:
        key = tuple(row[:3])
        cells = [f"**{c}**" if n in best.get(key, ()) else c for c, n in zip(row[3:], names)]
        lines.append("| " + " | ".join(row[:3] + cells) + " |")
    lines += ["", "Values in parentheses: share of the data set's items found in the vocabulary "
                  "(shown when below 100%). Bold: best model of the row."]
    notes = _notes(report)
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n.strip()}" for n in notes if n.strip()]
    lines += ["", f"Evaluation took {report.seconds:.1f} s."]
    return "\n".join(lines) + "\n"


def _notes(report: Report) -> list[str]:
    notes = []
    for model in report.models:
        problems = {k: v for k, v in model.load_problems.items() if v}
        if problems:
            notes.append(f"{model.name}: skipped while loading: "
                         + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in problems.items()))
    notes += task_notes(report)
    notes += skipped_lines(report)
    notes += [f"FAILED: {message}" for message in report.failed]
    return ([""] + notes) if notes else []


def skipped_lines(report: Report) -> list[str]:
    """A ``SKIPPED`` line per data set not evaluated (marked when it was asked for by name),
    then where the data folder was looked for and how to point to it."""
    asked = set(report.skipped_requested)
    lines = [f"SKIPPED{' (requested)' if m in asked else ''}: {m}" for m in report.skipped]
    if lines and report.data_hint:
        lines.append(f"  {report.data_hint}")
    return lines


def task_notes(report: Report) -> list[str]:
    """Each registered task's notes on its scores (e.g. the POS baselines), tasks in order."""
    lines = []
    for task in EVALUATION_TASKS.values():
        scores = [s for model in report.models for s in model.scores if s.task == task.name]
        if scores:
            lines += task.notes(scores)
    return lines


def to_json(report: Report) -> dict:
    return {
        "seconds": round(report.seconds, 3),
        "settings": report.settings,
        "skipped": report.skipped,
        "skipped_requested": report.skipped_requested,
        "data_hint": report.data_hint,
        "failed": report.failed,
        "models": [
            {**{k: v for k, v in dataclasses.asdict(m).items() if k != "scores"},
             "scores": [s.to_dict() for s in m.scores]}
            for m in report.models
        ],
    }


def dump_json(report: Report, handle) -> None:
    json.dump(json_safe(to_json(report)), handle, indent=2, allow_nan=False, default=str)
    handle.write("\n")


def _panel_of(score: Score):
    """The panel a score is drawn in and its line label, or None: its task's first panel that
    takes it."""
    task = EVALUATION_TASKS.get(score.task)
    for panel in task.PANELS if task is not None else ():
        label = panel.label(score)
        if label is not None:
            return panel, label
    return None


def _panels(report: Report) -> dict:
    """Panel title -> {line label: [value per model]} for the headline scores, panels in their
    ``order`` (then first seen)."""
    keys, cells = score_table(report)
    names = [m.name for m in report.models]
    panels: dict = {}
    order: dict = {}
    for key in keys:
        first = next(cells[(key, n)] for n in names if (key, n) in cells)
        found = _panel_of(first)
        if found is None:
            continue
        panel, label = found
        order.setdefault(panel.title, panel.order)
        values = [cells.get((key, n)) for n in names]
        panels.setdefault(panel.title, {})[label] = [math.nan if s is None else s.value for s in values]
    return dict(sorted(panels.items(), key=lambda item: order[item[0]]))


def _log_scale_titles() -> set:
    return {p.title for task in EVALUATION_TASKS.values() for p in task.PANELS if p.log_scale}


def plot(report: Report, handle) -> None:
    """PNG of the headline scores: one panel per kind of score, models along the x axis in the
    order given (so checkpoints read as a learning curve)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(report)
    log_scale = _log_scale_titles()
    names = [m.name for m in report.models]
    count = max(1, len(panels))
    columns = min(3, count)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.8 * rows), squeeze=False)
    for ax, (title, lines) in zip(axes.flat, panels.items()):
        for label, values in lines.items():
            ax.plot(range(len(names)), values, marker="o", label=label)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        if title in log_scale:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
