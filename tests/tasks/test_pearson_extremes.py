"""`tasks.metrics.pearson` at extreme magnitudes: the same correlation as at ordinary ones.

The denominator was sqrt(Σxm² · Σym²): the product overflowed to inf for values ~1e77 and up and the squares
themselves from ~1e154, so pearson([1e200, 2e200, 3e200], [1, 2, 3]) was 0.0 (a RuntimeWarning) instead of 1.0; at
~1e-155 and down the squares underflowed to 0 and a perfect correlation read as NaN (constant).
"""

import warnings

import numpy as np
import pytest

from tasks.metrics import pearson
from tasks.metrics import spearman

X, Y = np.array([0.3, -1.2, 2.5, 0.7, 1.9]), np.array([1.0, 0.2, 3.1, 0.4, 2.2])


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-160, 1e80, 1e154, 1e200, 1e300])
def test_pearson_does_not_depend_on_the_scale(scale):
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # (an overflow or underflow warning fails the test)
    assert pearson(X * scale, Y) == pytest.approx(pearson(X, Y), abs=1e-12)
    assert pearson(X, Y * scale) == pytest.approx(pearson(X, Y), abs=1e-12)
  assert pearson([1e200, 2e200, 3e200], [1, 2, 3]) == pytest.approx(1.0)


def test_constant_and_non_finite_inputs_stay_nan():
  assert np.isnan(pearson([0.1, 0.1, 0.1], [1, 2, 3]))
  assert np.isnan(pearson([0.0, 0.0, 0.0], [1, 2, 3]))
  assert np.isnan(pearson([1e300, 1e300, 1e300], [1, 2, 3]))
  assert np.isnan(pearson([1.0, np.inf, 2.0], [1, 2, 3]))
  assert spearman([1e300, 2e300, 3e300], [3, 2, 1]) == pytest.approx(-1.0)
