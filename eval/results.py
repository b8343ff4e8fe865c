"""The one shape every task reports in: a list of :class:`Score` rows per model."""
from __future__ import annotations

import dataclasses
from typing import Optional


@dataclasses.dataclass
class Score:
    """One number in the report, e.g. (similarity, ws353, spearman) = 0.66 on 340 of 353 pairs."""

    task: str
    dataset: str
    metric: str
    value: float
    higher_is_better: bool = True
    #: items scored and items in the data set (coverage); None where it does not apply
    covered: Optional[int] = None
    total: Optional[int] = None
    #: anything else worth keeping in the JSON report (OOV counts, malformed lines, baselines)
    details: dict = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.task, self.dataset, self.metric)

    @property
    def coverage(self) -> Optional[float]:
        if self.covered is None or not self.total:
            return None
        return self.covered / self.total

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")
