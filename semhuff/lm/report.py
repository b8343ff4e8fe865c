"""What a ``semhuff-lm`` run reports (``LMReport``): per epoch the training loss, the held-out
perplexity (and for clustered layers the cluster and in-cluster perplexity, eqs. 5-6), tokens/s
of whole steps, the seconds the output layer's forward + backward took (measured apart: the
network's output is detached at the layer, the layer's backward runs first, then the network's
from the gradient it left), and the re-assignments."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import List, Optional

from ..io_utils import atomic_output


@dataclass
class HeldOut:
    perplexity: float
    nll: float                                   # mean, nats
    tokens: int
    cluster_perplexity: Optional[float] = None   # clustered layers: exp(mean -log P(c(w)|h))
    in_cluster_perplexity: Optional[float] = None


@dataclass
class LMEpoch:
    train_loss: float
    seconds: float
    tokens: int
    output_seconds: float       # the output layer's forward + backward
    heldout: HeldOut

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


@dataclass
class LMReport:
    settings: dict
    layer: str
    vocab_size: int
    train_tokens: int
    untrained: HeldOut
    epochs: List[LMEpoch] = field(default_factory=list)
    reassignments: List[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LMReport":
        """An ``LMReport`` from its ``to_dict()`` (a checkpoint's report so far)."""
        epochs = [LMEpoch(**{**e, "heldout": HeldOut(**e["heldout"])}) for e in d["epochs"]]
        return cls(d["settings"], d["layer"], d["vocab_size"], d["train_tokens"],
                   HeldOut(**d["untrained"]), epochs, list(d["reassignments"]))

    def summary(self) -> str:
        last = self.epochs[-1]
        h = last.heldout
        clusters = (f" (cluster {h.cluster_perplexity:,.2f}, in-cluster "
                    f"{h.in_cluster_perplexity:,.2f})" if h.cluster_perplexity else "")
        return (f"held-out perplexity {h.perplexity:,.2f}{clusters} after {len(self.epochs)} "
                f"epoch(s) (untrained {self.untrained.perplexity:,.1f}); "
                f"{last.tokens_per_second:,.0f} tokens/s, output layer "
                f"{1e3 * last.output_seconds / max(last.tokens, 1) * 1e3:.1f} ms per 1k tokens")


def write_report(path: str, report: LMReport) -> None:
    with atomic_output(path, "w") as fh:
        json.dump(report.to_dict(), fh, indent=1)
