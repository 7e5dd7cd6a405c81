"""IREE's own miscompiles that the lowering works around, each reduced to MLIR that IREE
alone compiles and runs, with no staged lowering in between. Each is a strict xfail: it
asserts the right answer, so the day an IREE upgrade fixes one it XPASSes, fails the
suite, and says which Note's workaround can then be reconsidered (the workarounds' own
tests, which go through staged, keep passing either way). Reported values are those
IREE 3.13 gives on llvm-cpu."""

from __future__ import annotations

import numpy as np
import pytest

from staged.runtime.compiler import compile_mlir
from staged.runtime.device import device, to_host

_ELEMENTWISE_2D = (
    "indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, "
    "affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], "
    'iterator_types = ["parallel", "parallel"]'
)


def _select_then_insert(p_is_constant: bool) -> str:
    """``w = where(all-true constant mask, p, a)``; ``r = w`` with its row 1 set to ``x``;
    both returned. ``p``: a constant of 5s, or the third argument."""
    p_arg = "" if p_is_constant else ", %p: tensor<2x1xf32>"
    p_constant = "%p = arith.constant dense<5.0> : tensor<2x1xf32>" if p_is_constant else ""
    return f"""
func.func @main(%x: tensor<1x1xf32>, %a: tensor<2x1xf32>{p_arg})
    -> (tensor<2x1xf32>, tensor<2x1xf32>) {{
  %m = arith.constant dense<true> : tensor<2x1xi1>
  {p_constant}
  %e = tensor.empty() : tensor<2x1xf32>
  %w = linalg.generic {{{_ELEMENTWISE_2D}}}
      ins(%m, %p, %a : tensor<2x1xi1>, tensor<2x1xf32>, tensor<2x1xf32>)
      outs(%e : tensor<2x1xf32>) {{
  ^bb0(%i: i1, %u: f32, %v: f32, %o: f32):
    %s = arith.select %i, %u, %v : f32
    linalg.yield %s : f32
  }} -> tensor<2x1xf32>
  %r = tensor.insert_slice %x into %w[1, 0][1, 1][1, 1] : tensor<1x1xf32> into tensor<2x1xf32>
  return %w, %r : tensor<2x1xf32>, tensor<2x1xf32>
}}
"""


def _iree_bug(why: str):
    """A strict xfail: it fails (XPASS) the day IREE computes this right."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=why)


def _run(text: str, *args):
    module = device().load(compile_mlir(text))
    return [to_host(r) for r in module.invoke("main", list(args))]


_X = np.full((1, 1), 7, np.float32)
_A = np.full((2, 1), 3, np.float32)
_B = np.full((2, 1), 2, np.float32)


@_iree_bug(
    "IREE 3.13 writes the insert into the returned select (of a constant: got [5, 7] "
    "and [0, 0]; of an argument: [2, 7] twice); Note [splat constants] in "
    "staged/lower/mlir/invariants.py",
)
@pytest.mark.parametrize("p_is_constant", [True, False], ids=["constant", "argument"])
def test_iree_select_then_written(p_is_constant):
    p = 5 if p_is_constant else 2
    args = (_X, _A) if p_is_constant else (_X, _A, _B)
    w, r = _run(_select_then_insert(p_is_constant), *args)
    np.testing.assert_array_equal(w, [[p], [p]])
    np.testing.assert_array_equal(r, [[p], [7]])


def test_iree_constant_then_written_is_right():
    """The control: the same insert into a returned constant (what Note [splat
    constants] emits instead) is compiled right, so the xfails above fail for the select."""
    text = """
func.func @main(%x: tensor<1x1xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>) {
  %c = arith.constant dense<5.0> : tensor<2x1xf32>
  %r = tensor.insert_slice %x into %c[1, 0][1, 1][1, 1] : tensor<1x1xf32> into tensor<2x1xf32>
  return %c, %r : tensor<2x1xf32>, tensor<2x1xf32>
}
"""
    c, r = _run(text, _X)
    np.testing.assert_array_equal(c, [[5], [5]])
    np.testing.assert_array_equal(r, [[5], [7]])


@_iree_bug(
    "IREE 3.13 sums x * 0 + 1 over 10 int64s to 2; Note [invariant reductions] in "
    "staged/lower/mlir/invariants.py",
)
def test_iree_sum_of_a_value_folded_to_one_number():
    text = """
func.func @main(%x: tensor<10xi64>) -> tensor<i64> {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %e = tensor.empty() : tensor<10xi64>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%x : tensor<10xi64>) outs(%e : tensor<10xi64>) {
  ^bb0(%a: i64, %o: i64):
    %m = arith.muli %a, %c0 : i64
    %s = arith.addi %m, %c1 : i64
    linalg.yield %s : i64
  } -> tensor<10xi64>
  %z = tensor.empty() : tensor<i64>
  %zf = linalg.fill ins(%c0 : i64) outs(%z : tensor<i64>) -> tensor<i64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
      iterator_types = ["reduction"]} ins(%y : tensor<10xi64>) outs(%zf : tensor<i64>) {
  ^bb0(%a: i64, %o: i64):
    %s = arith.addi %a, %o : i64
    linalg.yield %s : i64
  } -> tensor<i64>
  return %r : tensor<i64>
}
"""
    (r,) = _run(text, np.arange(10, dtype=np.int64))
    assert r == 10


@_iree_bug(
    "IREE 3.13 reads the zeros written into a value computed from constants only; "
    "Note [constant destinations] in staged/lower/mlir/invariants.py",
)
def test_iree_read_of_a_constant_computation_also_written():
    text = """
func.func @main(%x: tensor<2x4xf32>) -> (tensor<3x4xf32>, tensor<2x4xf32>) {
  %c = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]>
      : tensor<12xf32>
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<12xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%c : tensor<12xf32>) outs(%e : tensor<12xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %one : f32
    linalg.yield %s : f32
  } -> tensor<12xf32>
  %g2 = tensor.expand_shape %g [[0, 1]] output_shape [3, 4] : tensor<12xf32> into tensor<3x4xf32>
  %w = tensor.insert_slice %x into %g2[1, 0][2, 4][1, 1] : tensor<2x4xf32> into tensor<3x4xf32>
  %r = tensor.extract_slice %g2[1, 0][2, 4][1, 1] : tensor<3x4xf32> to tensor<2x4xf32>
  return %w, %r : tensor<3x4xf32>, tensor<2x4xf32>
}
"""
    w, r = _run(text, np.zeros((2, 4), np.float32))
    g = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    np.testing.assert_array_equal(r, g[1:])
    g[1:] = 0
    np.testing.assert_array_equal(w, g)


@_iree_bug(
    "IREE 3.13 writes the insert into the returned slice of the argument ([[5, 2]]) "
    "beside a result computed from constants; Note [written results] in "
    "staged/lower/mlir/module.py",
)
def test_iree_returned_slice_also_written():
    text = """
func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<1x2xf32>)
    -> (tensor<1x2xf32>, tensor<1x2xf32>, tensor<3xf32>) {
  %z = arith.constant dense<0.0> : tensor<3xf32>
  %s = tensor.extract_slice %arg0[1][2][1] : tensor<3xf32> to tensor<2xf32>
  %v = tensor.expand_shape %s [[0, 1]] output_shape [1, 2] : tensor<2xf32> into tensor<1x2xf32>
  %five = arith.constant dense<5.0> : tensor<1x1xf32>
  %w = tensor.insert_slice %five into %v[0, 0][1, 1][1, 1] : tensor<1x1xf32> into tensor<1x2xf32>
  %c = tensor.collapse_shape %arg1 [[0, 1]] : tensor<1x2xf32> into tensor<2xf32>
  %g = tensor.insert_slice %c into %z[1][2][1] : tensor<2xf32> into tensor<3xf32>
  return %v, %w, %g : tensor<1x2xf32>, tensor<1x2xf32>, tensor<3xf32>
}
"""
    v, w, g = _run(text, np.arange(3, dtype=np.float32), np.ones((1, 2), np.float32))
    np.testing.assert_array_equal(v, [[1, 2]])
    np.testing.assert_array_equal(w, [[5, 2]])
    np.testing.assert_array_equal(g, [0, 1, 1])


@_iree_bug(
    "IREE 3.13 returns an argument that another result is written into (iree.abi.output) "
    "holding that result, not its value at the call; Note [state in place] in "
    "staged/lower/mlir/in_place.py (its other readers are not ordered before the write "
    "either: a matmul read the new value in 50 of 50 runs)",
)
def test_iree_argument_written_in_place_returned_with_the_new_value():
    text = """
func.func @main(%w: tensor<4xf32> {iree.abi.output = 0 : index}, %g: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %n, %w : tensor<4xf32>, tensor<4xf32>
}
"""
    w = device().upload(np.arange(4, dtype=np.float32))
    n, old = _run(text, w, np.ones(4, np.float32))
    np.testing.assert_array_equal(n, [-1, 0, 1, 2])
    np.testing.assert_array_equal(old, [0, 1, 2, 3])
