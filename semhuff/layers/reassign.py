"""The Numba trainer's trigger for self-organization: a ``Hook`` (``semhuff.hooks``) that has a
clustered layer (``classes.ClassSoftmax``, ``self_organized.SelfOrganizedHS``) re-assign its
words every K input words, on quiescent weights. What a re-assignment does is the layer's own
``reorganize``, over the ``trees.organizer.SelfOrganizer`` that both trainers share."""
from __future__ import annotations

import logging
import time
from typing import Optional

from ..hooks import Hook

logger = logging.getLogger(__name__)


class ReassignHook(Hook):
    """Every ``reassign_every`` words: the layer re-assigns its words (``layer.reorganize``);
    at the start of training it chooses K for this run (``SelfOrganizer.plan_run``), asks for
    chunks of at most K/2 words where the default ones are longer (``max_chunk_words``) and
    sets its smoothing (``layer.prepare``)."""

    def __init__(self, layer, every: Optional[int], heldout=None):
        self.layer = layer
        self.every_words = every  # None: set by on_train_begin, from the run's length
        self.heldout = heldout

    def on_train_begin(self, context) -> None:
        organizer = self.layer.organizer
        self.every_words = organizer.plan_run(context.total_words, context.chunk_words)
        self.max_chunk_words = organizer.chunk_cap
        self.layer.prepare(context)

    def on_words(self, context) -> None:
        if context.progress > self.layer.organizer.reassign_until:
            return  # the clusters are frozen for the rest of this train() call
        row = {"words_done": context.words_done, "epoch": context.epoch}
        if self.heldout is not None:  # measured before the clusters change: the model as trained
            started = time.perf_counter()
            row.update(self.layer.diagnose(context, self.heldout))
            row["diagnose_seconds"] = time.perf_counter() - started
        started = time.perf_counter()
        row.update(self.layer.reorganize(context))
        row["seconds"] = time.perf_counter() - started
        self.layer.organizer.record(row)
        logger.info("re-assigned clusters at %d words: %.1f%% of the words (%.1f%% of the tokens) "
                    "moved%s", context.words_done, 100 * row["changed_share"],
                    100 * row["changed_mass"],
                    f"; held-out cluster perplexity {row['cluster_ppl']:.1f}"
                    if "cluster_ppl" in row else "")
