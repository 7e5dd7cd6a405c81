"""reshape/view sizes resolved once per (sizes, input shape) (``_RESOLVED`` in
staged/eager/ops/shape.py): a size list seen before, on another shape or of another type,
gives torch's result or error, as the first time."""

import numpy as np
import pytest
import torch

import staged


def _both(shape, call):
    s = staged.arange(float(np.prod(shape))).reshape(shape)
    t = torch.arange(float(np.prod(shape))).reshape(shape)
    return call(s), call(t)


@pytest.mark.parametrize(
    "sizes",
    [(2, 4), (4, -1), (-1,), (8,), (1, 2, 4), (np.int64(2), 4), ((2, 4),), ([4, 2],)],
)
def test_sizes_seen_before_give_torchs_views(sizes):
    for _ in range(2):  # the second call finds the sizes resolved
        for name in ("view", "reshape"):
            s, t = _both((2, 4), lambda x, name=name: getattr(x, name)(*sizes))
            assert s.shape == t.shape and s.tolist() == t.tolist()
            assert s._base is not None


def test_the_same_sizes_on_another_shape_raise_torchs_errors():
    for lib in (staged, torch):
        assert lib.zeros(8).view(2, 4).shape == (2, 4)
        with pytest.raises(RuntimeError, match=r"shape '\[2, 4\]' is invalid for input of size 6"):
            lib.zeros(6).view(2, 4)
        assert lib.zeros(12).view(4, -1).shape == (4, 3)
        assert lib.zeros(8).view(4, -1).shape == (4, 2)
        with pytest.raises(RuntimeError, match="is invalid for input of size 7"):
            lib.zeros(7).view(4, -1)
        with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
            lib.zeros(8).view(-1, -1)
        with pytest.raises(RuntimeError, match="invalid shape dimension -2"):
            lib.zeros(8).view(-2, -4)


def test_a_size_tensor_is_read_each_time():
    n = staged.tensor(2)
    x = staged.zeros(8)
    assert x.view(n, -1).shape == (2, 4)
    n.fill_(4)
    assert x.view(n, -1).shape == (4, 2)
