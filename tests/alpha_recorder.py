"""A plugin output layer whose body records the learning rate the kernels hand it, prediction by
prediction, and trains nothing: how the tests see the schedule (tests/test_paper_rules.py,
tests/test_continue_resume.py)."""
import numba
import numpy as np

from semhuff.layers import OutputLayer, register_output_layer

NAME = "alpha-recorder-test"


@numba.njit(nogil=True)
def _record_alpha_body(h, w, weights, larg, alpha, err, state):
    rates, count = larg
    i = count[0]
    if i < rates.shape[0]:
        rates[i] = alpha
    count[0] = i + 1
    for d in range(err.shape[0]):
        err[d] = 0.0
    return 0.0, state


@register_output_layer(NAME)
class AlphaRecorder(OutputLayer):
    """``rates[:count[0]]``: the rate of every prediction since the last ``reset``."""

    CAPACITY = 1_000_000

    def n_rows(self, n_words):
        return 1

    def allocate(self, n_words, dim):
        super().allocate(n_words, dim)
        self.reset()

    def load_arrays(self, arrays):  # a loaded model records afresh
        super().load_arrays(arrays)
        self.reset()

    def reset(self):
        self.rates = np.full(self.CAPACITY, np.nan, np.float32)
        self.count = np.zeros(1, np.int64)

    def kernel_args(self):
        return (self.rates, self.count)

    def custom_body(self):
        return _record_alpha_body
