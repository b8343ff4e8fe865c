"""A training run as a person wants to look at it: ``semhuff-train --report run.json`` writes the
settings, timings, speed and the loss curve (per chunk and per epoch) as JSON, and the same
curve as a PNG beside it (``run.png``).

The loss is the mean negative log-likelihood per prediction (nats), measured online while
training: each chunk's value is its own mean, each epoch's the mean over its chunks'
predictions. ``raw_words`` counts corpus tokens (out-of-vocabulary ones included),
``trained_words`` the tokens left after down-sampling. Chunks are listed and drawn in corpus
order (epoch, chunk number), not in the order the workers finished them.

Why the last epoch's loss often rises (``LOSS_NOTE``, printed on the plot and in the JSON):
the online loss scores each prediction just before its own update, with weights that have
just trained on the text before it, so it includes the model's adaptation to the passage it
is in (the same document, the same book). That adaptation is proportional to the learning
rate; as the rate falls to ``min_alpha`` it fades, and the online loss of the last epoch (or
two) goes up, while the model itself still improves: the loss of the same text scored with
the weights frozen at each epoch's end keeps falling, and so does held-out perplexity
(``semhuff-score``). Measured in docs/performance.md ("Quality at the clip"). The plot draws
the learning rate beside the curve for this reason.
"""
from __future__ import annotations

import json
import os
import platform
import textwrap
import time
from typing import Optional

from .io_utils import atomic_output, check_writable, json_safe
from .trainer import TrainReport

REPORT_VERSION = 1
LOSS_NOTE = ("online loss: each prediction is scored just before its own update, so it includes "
             "the model's adaptation to the text just before it, which fades as the learning "
             "rate falls to min_alpha: the last epoch's loss may rise while the model still "
             "improves (held-out perplexity, semhuff-score, keeps falling)")


def plot_path(path: str) -> str:
    """Where the PNG goes: ``run.json`` -> ``run.png``, anything else -> ``<path>.png``."""
    root, ext = os.path.splitext(os.fspath(path))
    return root + ".png" if ext.lower() == ".json" else os.fspath(path) + ".png"


def check_report_writable(path: str) -> None:
    check_writable(path)
    check_writable(plot_path(path))


def _per(num: float, den: float) -> Optional[float]:
    return num / den if den else None


def report_dict(model, report: TrainReport, extra: Optional[dict] = None) -> dict:
    """The JSON document: settings, timings, speed, loss per epoch and per chunk."""
    params = model.params()
    rate = _rate(params.get("alpha"), params.get("min_alpha"), len(report.epochs))
    epochs = [{"epoch": i + 1, "raw_words": e.raw_words, "trained_words": e.trained_words,
               "predictions": e.pairs, "loss": e.loss, "loss_per_prediction": _per(e.loss, e.pairs),
               "learning_rate_start": rate(i), "learning_rate_end": rate(i + 1),
               "seconds": e.seconds, "words_per_second": _per(e.raw_words, e.seconds)}
              for i, e in enumerate(report.epochs)]
    raw_done = 0
    chunks = []
    # by position in the corpus, not by finishing order (reports of older runs are in the latter)
    for c in sorted(report.chunks, key=lambda c: (c.epoch, c.number)):
        raw_done += c.raw_words
        chunks.append({"epoch": c.epoch + 1, "chunk": c.number, "chunks": c.count,
                       "raw_words": c.raw_words,
                       "trained_words": c.trained_words, "predictions": c.pairs, "loss": c.loss,
                       "loss_per_prediction": _per(c.loss, c.pairs), "raw_words_done": raw_done,
                       "at_seconds": c.at_seconds})
    return {
        "report_version": REPORT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {**params, "output_layer": model.layer.describe(),
                     "vocabulary_words": len(model.vocab), "corpus_tokens": model.vocab.total_tokens,
                     "in_vocabulary_tokens": model.vocab.retained_tokens},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "timings": {"training_seconds": report.seconds, "compile_seconds": report.compile_seconds,
                    "hook_seconds": report.hook_seconds, **(extra or {}).get("timings", {})},
        "speed": {"raw_words": report.raw_words, "trained_words": report.trained_words,
                  "words_per_second": _per(report.raw_words, report.seconds),
                  "trained_words_per_second": _per(report.trained_words, report.seconds)},
        "disk": {"id_cache_bytes": report.id_cache_bytes},
        "loss_note": LOSS_NOTE,
        "epochs": epochs,
        "chunks": chunks,
        **{k: v for k, v in (extra or {}).items() if k != "timings"},
    }


def _rate(alpha, min_alpha, epochs: int):
    """The learning rate after ``k`` of ``epochs`` epochs (the schedule runs over the call)."""
    if alpha is None or min_alpha is None or not epochs:
        return lambda k: None
    return lambda k: alpha - (alpha - min_alpha) * k / epochs


def plot_report(doc: dict, handle) -> None:
    """Loss per prediction along the run (chunks, with each epoch's mean) and words/s per epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, speed_ax) = plt.subplots(1, 2, figsize=(11, 4),
                                            gridspec_kw={"width_ratios": [2.2, 1]})
    chunks = [c for c in doc["chunks"] if c["loss_per_prediction"] is not None]
    if chunks:  # each chunk's value over the words it trained
        ends = [c["raw_words_done"] / 1e6 for c in chunks]
        values = [c["loss_per_prediction"] for c in chunks]
        start = (chunks[0]["raw_words_done"] - chunks[0]["raw_words"]) / 1e6
        loss_ax.step([start] + ends, values[:1] + values, where="pre", lw=1, alpha=0.7,
                     label="chunk")
    done = 0
    xs, rates = [], []
    for epoch in doc["epochs"]:
        start, done = done, done + epoch["raw_words"]
        if epoch["loss_per_prediction"] is not None:
            loss_ax.hlines(epoch["loss_per_prediction"], start / 1e6, done / 1e6, colors="C1",
                           lw=2, label="epoch mean" if epoch["epoch"] == 1 else None)
        loss_ax.axvline(done / 1e6, color="grey", lw=0.5, alpha=0.5)
        if epoch.get("learning_rate_start") is not None:
            xs += [start / 1e6, done / 1e6]
            rates += [epoch["learning_rate_start"], epoch["learning_rate_end"]]
    if rates:  # the online loss's rise at the end goes with this fall (LOSS_NOTE)
        rate_ax = loss_ax.twinx()
        rate_ax.plot(xs, rates, color="grey", ls="--", lw=1)
        rate_ax.set_ylabel("learning rate (dashed)", color="grey", fontsize=8)
        rate_ax.tick_params(labelsize=7, colors="grey")
        rate_ax.set_ylim(0, max(rates) * 1.05)
    settings = doc["settings"]
    loss_ax.set_title(f"{'skip-gram' if settings['sg'] else 'CBOW'}, {settings['output_layer']}, "
                      f"dim {settings['vector_size']}", fontsize=9)
    loss_ax.set_xlabel("corpus words trained (millions)")
    loss_ax.set_ylabel("loss per prediction (nats)")
    loss_ax.grid(alpha=0.3)
    loss_ax.legend(fontsize=8)
    epochs = doc["epochs"]
    speed_ax.bar([e["epoch"] for e in epochs], [(e["words_per_second"] or 0) / 1e3 for e in epochs])
    speed_ax.set_xticks([e["epoch"] for e in epochs])
    speed_ax.set_xlabel("epoch")
    speed_ax.set_ylabel("thousand words/s")
    speed_ax.set_title(f"{(doc['speed']['words_per_second'] or 0):,.0f} words/s overall, "
                       f"{doc['timings']['training_seconds']:.1f} s", fontsize=9)
    speed_ax.grid(alpha=0.3, axis="y")
    fig.text(0.01, 0.01, textwrap.fill(doc.get("loss_note", LOSS_NOTE), 150), fontsize=7,
             color="dimgrey", va="bottom")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


def write_training_report(path: str, model, report: TrainReport, extra: Optional[dict] = None) -> str:
    """Write the JSON report to ``path`` and its plot beside it; returns the plot's path."""
    doc = json_safe(report_dict(model, report, extra))
    with atomic_output(path, "w") as fh:
        json.dump(doc, fh, indent=1, allow_nan=False)
        fh.write("\n")
    png = plot_path(path)
    with atomic_output(png, "wb") as fh:
        plot_report(doc, fh)
    return png


__all__ = ["check_report_writable", "plot_path", "report_dict", "write_training_report"]
