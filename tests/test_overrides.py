"""``torch.overrides.TorchFunctionMode``: a mode entered on a thread sees the calls of
staged's public functions there (``torch.*``, ``nn.functional``), with itself off while it
handles one, stacked modes innermost first, as torch's."""

import threading

import pytest
import torch

import staged
import staged.nn.functional as F
from staged.overrides import TorchFunctionMode, _get_current_function_mode, is_tensor_like


def _log(lib):
    seen = []

    class Log(lib.overrides.TorchFunctionMode):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((self.tag, func.__name__))
            return func(*args, **(kwargs or {}))

    return Log, seen


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_a_mode_sees_public_functions_and_is_off_inside_its_handler(lib):
    Log, seen = _log(lib)
    x = lib.ones(2)
    with Log("outer"), Log("inner"):
        y = lib.add(x, 1)
        z = lib.nn.functional.relu(y)
    assert z.tolist() == [2.0, 2.0]
    # the inner mode first; its call reaches the outer one, whose call runs the function
    assert seen == [("inner", "add"), ("outer", "add"), ("inner", "relu"), ("outer", "relu")]


def test_a_mode_decides_what_a_call_returns_and_modes_are_per_thread():
    class Zeros(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is staged.ones:
                return staged.zeros(*args, **(kwargs or {}))
            return func(*args, **(kwargs or {}))

    other = []
    with Zeros() as mode:
        assert staged.ones(3).tolist() == [0.0] * 3
        assert _get_current_function_mode() is mode
        t = threading.Thread(target=lambda: other.append(staged.ones(2).tolist()))
        t.start()
        t.join()
    assert other == [[1.0, 1.0]]  # another thread's calls are not this thread's mode's
    assert staged.ones(1).tolist() == [1.0] and _get_current_function_mode() is None


def test_modes_must_exit_in_order_and_define_the_handler():
    a, b = TorchFunctionMode(), TorchFunctionMode()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="not the innermost TorchFunctionMode"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    with pytest.raises(NotImplementedError, match="must define __torch_function__"):
        staged.zeros(1)
    a.__exit__(None, None, None)
    assert staged.zeros(1).tolist() == [0.0]
    assert is_tensor_like(staged.ones(1)) and not is_tensor_like([1.0])


def test_errors_inside_a_mode_keep_their_type_and_name_the_users_line():
    Log, seen = _log(staged)
    a, b = staged.ones(2), staged.ones(3)
    with Log("m"), pytest.raises(RuntimeError, match=r"test_overrides\.py:\d+: .*size"):
        staged.add(a, b)
    assert seen == [("m", "add")]
    assert F.relu(staged.ones(1)).tolist() == [1.0]  # exited: nothing is handed to it
    assert seen == [("m", "add")]
