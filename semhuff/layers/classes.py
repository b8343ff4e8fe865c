"""The two-level (class-based) softmax, Shen et al. eqs. 1-4: P(w | h) = P(c(w) | h) P(w | c(w), h)
with a softmax over C (about sqrt V) cluster vectors and one over the words of w's cluster.

Its clusters are ``clustering``:

* ``"self-organized"``: learned while training (``organizer.SelfOrganizer``: random or
  frequency-binned start, re-assigned every K words from the model's own predictions);
* ``"frequency"``: frequency binning, fixed (class-based HSM of Mikolov et al. 2011);
* ``"random"``: random, fixed.

The paper projects h through ReLU layers W_c, W_w before the two softmaxes (eq. 1). Here h is
used as is: in skip-gram h is itself a trained word vector, so the projections add 2D^2 weights
shared by every prediction (the hottest rows Hogwild threads could fight over) and 4D^2 flops
per prediction; docs/self_organized.md says what was measured.

The weights hold the C cluster vectors in rows 0..C-1 and the V word vectors in rows C..C+V-1.
Word vectors belong to their words and cluster vectors to their cluster ids, so a
re-assignment moves no weight: only the membership changes.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..errors import OptionError
from ..kernels import loop
from ..options import Option
from ..trees.clusters import cluster_members
from ..trees.organizer import ORGANIZER_OPTIONS, SelfOrganizer, organizer_options
from .base import OutputLayer
from .diagnostics import HELDOUT_OPTIONS, ClusterDiagnostics
from .reassign import ReassignHook

CLUSTERINGS = ("self-organized", "frequency", "random")
CLUSTERING = Option("clustering", str, "self-organized", "--loss class: its clusters, learned "
                    "while training (self-organized), frequency-binned (Mikolov et al. 2011) or "
                    "random, both fixed", choices=CLUSTERINGS)


class ClassSoftmax(ClusterDiagnostics, OutputLayer):
    body = loop.CLASS
    normalised = True
    OPTIONS = (CLUSTERING, *ORGANIZER_OPTIONS, *HELDOUT_OPTIONS)
    CLUSTERINGS = CLUSTERINGS

    def __init__(self, clustering: str = "self-organized", organizer: SelfOrganizer = None):
        super().__init__()
        CLUSTERING.validate(clustering)
        self.clustering = clustering
        self.organizer = organizer if organizer is not None else SelfOrganizer()
        self.members = self.starts = None

    @property
    def learned(self) -> bool:
        return self.clustering == "self-organized"

    @classmethod
    def create(cls, vocab, seed=1, clustering="self-organized", heldout=None,
               heldout_tokens=20_000, **options):
        vocab.need_two_words("the class softmax")
        settings = organizer_options(options)
        if clustering != "self-organized":
            extra = set(settings) - {"clusters"} | ({"heldout"} if heldout is not None else set())
            if extra:
                raise OptionError(f"{', '.join(sorted(extra))} only apply to self-organized "
                                  f"clusters (clustering 'self-organized'), not {clustering!r}")
            settings["cluster_init"] = "frequency" if clustering == "frequency" else "random"
        layer = cls(clustering, SelfOrganizer(seed=seed, **settings))
        layer.organizer.start(vocab.counts)
        layer._refresh()
        layer.set_heldout(vocab, heldout, heldout_tokens)
        return layer

    def _refresh(self) -> None:
        self.members, self.starts = cluster_members(self.organizer.cluster_of,
                                                    self.organizer.n_clusters)

    def n_rows(self, n_words: int) -> int:
        return self.organizer.n_clusters + n_words

    def kernel_args(self):
        o = self.organizer
        q = o.q if self.learned else o.q[:0]  # fixed clusters: the kernel skips the statistic
        return (o.cluster_of, self.members, self.starts, q, o.lam)

    def score_args(self, part: int = 0):
        return (self.organizer.cluster_of, self.members, self.starts, int(part))

    def score_kernel(self, sg, dim, cbow_mean=True):
        return loop.kernel(sg, dim, loop.CLASS_SCORE, cbow_mean=cbow_mean)

    # -- self-organization -----------------------------------------------------------------------
    def hooks(self):
        if not self.learned:
            return []
        return [ReassignHook(self, self.organizer.reassign_every, self.heldout_chunks)]

    def prepare(self, context) -> None:
        self.organizer.set_smoothing(context.counts, context.keep_prob, 1.0,
                                        context.total_words / context.epochs)

    def reorganize(self, context) -> Dict[str, float]:
        info = self.organizer.reassign(context.counts)
        self._refresh()
        context.layer_changed()
        return info

    # -- state -------------------------------------------------------------------------------------
    def config(self):
        return {"clustering": self.clustering, "organizer": self.organizer.config()}

    @classmethod
    def from_state(cls, config, arrays):
        layer = cls(config["clustering"], SelfOrganizer(**config["organizer"]))
        layer.load_arrays(arrays)
        return layer

    def arrays(self):
        return {**super().arrays(), **self.organizer.arrays()}

    def load_arrays(self, arrays):
        super().load_arrays(arrays)
        self.organizer.load_arrays(arrays)
        self._refresh()

    def cluster_assignment(self) -> np.ndarray:
        return self.organizer.cluster_of

    def untrained_loss(self, weight):
        """Uniform over the clusters, then over the target's cluster: ln C + ln |cluster|."""
        o = self.organizer
        if o.cluster_of is None:
            return None
        sizes = np.bincount(o.cluster_of, minlength=o.n_clusters)
        return float(np.log(o.n_clusters) + weight @ np.log(sizes[o.cluster_of].astype(np.float64)))

    def describe(self):
        how = {"self-organized": f"self-organized (re-assigned {self.organizer.describe_every()})",
               "frequency": "frequency-binned", "random": "random"}[self.clustering]
        return f"two-level class softmax over {self.organizer.n_clusters} {how} clusters"
