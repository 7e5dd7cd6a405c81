"""nn.functional's warnings name the user's line, as torch's C++ warnings do, however many
wrappers (autocast's, the error-site one) lie between the user and the function."""

from __future__ import annotations

import warnings

import pytest

import staged
import staged.nn.functional as F


@pytest.mark.parametrize(
    "call",
    [
        lambda: F.affine_grid(staged.eye(2, 3)[None], (1, 2, 4, 4)),
        lambda: F.grid_sample(staged.zeros(1, 2, 4, 4), staged.zeros(1, 2, 2, 2)),
        lambda: F.nll_loss(staged.zeros(3, 4), staged.tensor([0, 1, 2]), reduce=True),
        lambda: F.softmax(staged.zeros(3)),
        lambda: staged.nn.Softmax()(staged.zeros(3)),
        lambda: F.mse_loss(staged.zeros(3), staged.zeros(3, 1)),
    ],
)
def test_warning_points_at_the_callers_line(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    assert seen, "no warning"
    assert {w.filename for w in seen} == {__file__}, [(w.filename, str(w.message)) for w in seen]
