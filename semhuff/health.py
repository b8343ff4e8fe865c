"""Is a trained model a result? Training can fail without a non-finite number: with a learning
rate far too high (``alpha=5``) the weights grow huge but finite, the loss per prediction
reaches 10^8 nats and every neighbour is at cosine 1.00. Such a model is a failed run, as a
diverged one is: ``check_trained`` (after training) and ``check_epoch`` (at each epoch's end,
so a long run stops early) raise ``TrainingDiverged``, and the caller writes nothing.

The criterion is the loss: a run fails when an epoch's loss per prediction is more than
``WORSE_THAN_CHANCE`` times the loss of the same output layer untrained (``chance_loss``: all
output weights zero, every binary decision at 1/2), i.e. when the model predicts far worse
than one that knows nothing. Measured on lee (5 epochs, dim 100; untrained: HS 6.96, NS
4.16): every sound run stays below the untrained loss after its first epoch and at most 1.2x
in it (HS alpha 0.25: 8.45 in epoch 1, then 6.29); alpha 0.5 reaches 345x (HS), 10^11x (NS),
alpha 5 10^8x.

Decided: not the mean cosine of random word pairs, although that was the symptom
reported. It fails sound runs and misses failed ones: ``semhuff-train lee --loss ns`` (a sound
model: police -> helicopters, station, security) has a mean pair cosine of 0.997, gensim's
own default model on lee 0.996, while the ``alpha=5`` model's is 0.02 (its vectors point along
a few directions, each word's neighbours at 1.00). A small corpus with skip-gram or negative
sampling often gives every frequent word a large shared component (word2vec has no output
bias, the inputs carry it): that is anisotropy, not failure.

``warn_down_sampling`` (before training): a ``sample`` that keeps under ``LOW_KEEP_SHARE`` of
the words (gensim's ``sample=1``, read as a count, keeps 13% of a 3 MB corpus) leaves each
frequent word a few occurrences an epoch; the vectors are poor (gensim's as much as semhuff's:
measured, the same keep probabilities give both a mean pair cosine of 0.94-0.99). A warning,
not an error: it is a legitimate, if unwise, setting.
"""
from __future__ import annotations

import logging
import math
from typing import Optional

import numpy as np

from .errors import TrainingDiverged

logger = logging.getLogger(__name__)

WORSE_THAN_CHANCE = 2.0  # an epoch's loss above this many times the untrained loss: failed
LOW_KEEP_SHARE = 0.2     # down-sampling keeping less than this share of the words: a warning


def chance_loss(layer, counts, keep_prob) -> Optional[float]:
    """Loss per prediction (nats) of ``layer`` with all output weights zero, averaged over the
    targets training sees (``counts`` x ``keep_prob``): the layer's own ``untrained_loss``
    (negative sampling (1 + negative) ln 2, hierarchical softmax over any tree the expected code
    length x ln 2, ``hs+ns`` their sum, the two-level class softmax ln C + the expected
    ln |cluster|). None when the layer does not say (no check)."""
    weight = np.asarray(counts, np.float64) * np.asarray(keep_prob, np.float64)
    if weight.sum() <= 0:
        return None
    return layer.untrained_loss(weight / weight.sum())


def check_epoch(loss_per_prediction: float, chance: Optional[float], epoch: int, alpha: float,
                keep_share: float = 1.0) -> None:
    """``TrainingDiverged`` if the epoch (0-based) predicted far worse than an untrained
    model."""
    if chance is None or not math.isfinite(loss_per_prediction):
        return  # a non-finite loss is the trainer's own error
    if loss_per_prediction > WORSE_THAN_CHANCE * chance:
        raise TrainingDiverged(
            f"training failed in epoch {epoch + 1}: its loss per prediction "
            f"({loss_per_prediction:.3g}) is more than {WORSE_THAN_CHANCE:g} times an untrained "
            f"model's ({chance:.2f}); {likely_cause(alpha, keep_share)}; nothing was written")


def check_trained(syn0: np.ndarray, weights: np.ndarray, alpha: float, keep_share: float = 1.0,
                  last_loss: float = float("nan"), chance: Optional[float] = None,
                  epoch: int = 0) -> None:
    """``TrainingDiverged`` if the weights are not finite or the last epoch (``last_loss`` per
    prediction, 0-based ``epoch``) predicted far worse than an untrained model."""
    if not (_all_finite(syn0) and _all_finite(weights)):
        raise TrainingDiverged("training diverged: the weights became non-finite "
                               f"(learning rate {alpha} too high?); nothing was written")
    check_epoch(last_loss, chance, epoch, alpha, keep_share)


def _all_finite(a: np.ndarray) -> bool:
    """``np.isfinite(a).all()`` without its V x dim mask (15 MiB at 147k words x 100, at the
    end of training, where the run's memory peaks): a NaN makes the minimum and the
    maximum NaN, an infinity one of them."""
    return a.size == 0 or bool(np.isfinite(a.min()) and np.isfinite(a.max()))


def likely_cause(alpha: float, keep_share: float) -> str:
    if alpha > 0.1:
        return (f"the learning rate alpha={alpha:g} is too high (word2vec's usual: 0.025 "
                f"skip-gram, 0.05 CBOW)")
    if keep_share < LOW_KEEP_SHARE:
        return (f"down-sampling keeps only {100 * keep_share:.0f}% of the words (sample too "
                f"low?)")
    return f"the learning rate alpha={alpha:g} is likely too high for this corpus"


def keep_share(counts, keep_prob) -> float:
    counts = np.asarray(counts, np.float64)
    return float(counts @ np.asarray(keep_prob, np.float64) / max(counts.sum(), 1.0))


def warn_down_sampling(counts, keep_prob) -> None:
    """A warning when down-sampling keeps less than ``LOW_KEEP_SHARE`` of the words."""
    share = keep_share(counts, keep_prob)
    if share < LOW_KEEP_SHARE:
        logger.warning("down-sampling keeps only %.0f%% of the words: the frequent words keep a "
                       "few occurrences each and the vectors will be poor (word2vec's sample is "
                       "a fraction of the corpus, usually 1e-5 .. 1e-3)", 100 * share)


def check_model(model, report) -> None:
    """``check_trained`` for a ``semhuff.Word2Vec`` after ``report``'s training."""
    keep = model.vocab.keep_probabilities(model.sample)
    counts = model.vocab.counts
    last = report.epochs[-1].loss_per_pair if report.epochs else float("nan")
    check_trained(model.syn0, model.layer.weights, model.alpha, keep_share(counts, keep), last,
                  chance_loss(model.layer, counts, keep), len(report.epochs) - 1)
