"""What PyTorch Geometric needs of torch beyond the operators, each case run on staged and
on torch where torch has it: ``torch.futures``, ``torch._tensor_str``'s pieces of a repr,
``torch.distributed.rpc`` of a build without RPC, ``torch.onnx.is_in_onnx_export``."""

import logging
import threading

import pytest
import torch

import staged

LIBS = pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])


@LIBS
def test_future_result_callbacks_and_chains(lib):
    f = lib.futures.Future()
    assert not f.done()
    seen = []
    f.add_done_callback(lambda fut: seen.append(fut.value()))
    g = f.then(lambda fut: fut.wait() * 10)
    f.set_result(3)
    assert f.done() and f.wait() == 3 and f.value() == 3
    assert seen == [3] and g.wait() == 30
    f.add_done_callback(lambda fut: seen.append(-fut.value()))  # runs at once
    assert seen == [3, -3]
    with pytest.raises(RuntimeError, match="can only be marked completed once"):
        f.set_result(4)
    both = lib.futures.collect_all([f, g]).wait()
    assert [x.wait() for x in both] == [3, 30]
    assert lib.futures.wait_all([f, g]) == [3, 30]


@LIBS
def test_future_exceptions(lib, caplog):
    e = lib.futures.Future()
    e.set_exception(ValueError("no data"))
    with pytest.raises(ValueError, match="no data"):
        e.wait()
    with pytest.raises(ValueError, match="no data"):
        e.value()
    f = lib.futures.Future()
    f.set_result(1)

    def bad(_):
        raise KeyError("boom")

    h = f.then(bad)
    with pytest.raises(RuntimeError, match="error when running the callback.*boom"):
        h.wait()
    with caplog.at_level(logging.ERROR):
        f.add_done_callback(bad)  # logged and ignored, not raised


def test_future_wait_blocks_until_another_thread_sets_it():
    f = staged.futures.Future()
    threading.Timer(0.05, f.set_result, args=("late",)).start()
    assert f.wait() == "late"
    assert staged.jit.wait(staged.jit.fork(lambda a: a + 1, 1)) == 2
    assert isinstance(staged.jit.fork(lambda: 0), staged.futures.Future)
    with pytest.raises(RuntimeError, match="not completed"):
        staged.futures.Future().value()


@LIBS
def test_tensor_str_pieces_make_a_subclass_repr(lib):
    data = lib.tensor([[1.5, -2.0], [3.25, 40.0]])
    prefix = "Index("
    body = lib._tensor_str._tensor_str(data, len(prefix))
    text = lib._tensor_str._add_suffixes(
        prefix + body, ["dim_size=4", "is_sorted=True"], len(prefix), False
    )
    assert (
        text
        == "Index([[ 1.5000, -2.0000],\n       [ 3.2500, 40.0000]], dim_size=4, is_sorted=True)"
    )
    forced = lib._tensor_str._add_suffixes("X([1])", ["a=1", "b=2"], 2, True)
    assert forced == "X([1]),\n  a=1, b=2)"
    assert lib._tensor_str.PRINT_OPTS.linewidth == 80 and lib._tensor_str.PRINT_OPTS.precision == 4


def test_print_options_read_through_print_opts():
    staged.set_printoptions(linewidth=50)
    try:
        assert staged._tensor_str.PRINT_OPTS.linewidth == 50
    finally:
        staged.set_printoptions(profile="default")
    with pytest.raises(AttributeError, match="no 'nope'"):
        staged._tensor_str.PRINT_OPTS.nope


def test_rpc_is_absent_as_in_a_build_without_it():
    from staged.distributed import rpc

    assert rpc.is_available() is False
    assert not hasattr(rpc, "api")


def test_is_in_onnx_export_holds_while_export_traces(tmp_path):
    pytest.importorskip("onnx")
    seen = []

    def f(x):
        seen.append(staged.onnx.is_in_onnx_export())
        return (x * 2).sum()

    assert staged.onnx.is_in_onnx_export() is False
    staged.onnx.export(f, (staged.ones(3, requires_grad=True),), tmp_path / "f.onnx")
    assert seen and all(seen) and staged.onnx.is_in_onnx_export() is False


@LIBS
def test_zero_d_integer_tensors_are_sizes(lib):
    n = lib.tensor(2)
    assert tuple(lib.full(size=(n + 3,), fill_value=-1).shape) == (5,)
    assert tuple(lib.zeros(n, 3).shape) == (2, 3)
    with pytest.raises(TypeError):  # a float tensor is no size
        lib.zeros(lib.tensor(2.0), 3)


@LIBS
def test_default_device_name(lib):
    assert lib._C._get_default_device() == "cpu"
