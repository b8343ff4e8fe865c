"""The one shape every task reports in: a list of :class:`Score` rows per model."""
from __future__ import annotations

import dataclasses
import math
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


# The values a metric can take, by (task, metric) or (task, None) for all of a task's metrics.
# NaN ("nothing to score") is allowed everywhere; anything else outside is a bug or bad input.
_RANGES = {
    ("similarity", None): (-1.0, 1.0),
    ("analogy", None): (0.0, 1.0),
    ("pos", None): (0.0, 1.0),
    ("synonyms", "MRR"): (0.0, 1.0),
    ("synonyms", "MR"): (1.0, math.inf),
}
_SLACK = 1e-9  # float rounding of correlations


def out_of_range(score: Score) -> Optional[str]:
    """Why ``score`` is impossible for its metric, or None when it is a possible value."""
    bounds = _RANGES.get((score.task, score.metric), _RANGES.get((score.task, None)))
    value = score.value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not math.isfinite(value):
        return f"{score.metric} = {value}"
    if bounds is not None and not bounds[0] - _SLACK <= value <= bounds[1] + _SLACK:
        return f"{score.metric} = {value:.6g} outside [{bounds[0]:g}, {bounds[1]:g}]"
    return None
