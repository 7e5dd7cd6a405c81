"""``torch.nn.attention.flex_attention``: attention whose scores a user's ``score_mod``
changes and whose ``BlockMask`` (made from a ``mask_mod``) masks. Both are functions of
scalar tensors, mapped over (batch, head, query, key) by ``vmap`` as torch's
``_vmap_for_bhqkv`` maps them, so tensors they close over (a bias table indexed by
``q_idx``) take part, gradients included.

Computed as torch's math reference (``math_attention``): scores in float64 for float64
inputs and in float32 otherwise, and a query row that may attend to nothing gives 0 and an
lse of -inf. Two differences, both as torch's kernels (GPU, ``torch.compile``) behave: a
position outside the mask's blocks is masked, and one in a full block is not given to
``mask_mod`` (the eager reference applies ``mask_mod`` alone, so the two agree on every
mask ``create_block_mask`` makes); and the result is differentiable, and has its
``max_scores``, where torch's CPU path raises ``NotImplementedError``."""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, TypedDict

from ... import dtypes as dt
from ...autograd.vmap import vmap
from ...eager.factories import arange, zeros
from ...eager.ops.elementwise import where
from ...eager.ops.layers import pad
from ...eager.ops.reduction import argsort
from ...eager.ops.shape import repeat_interleave
from ...eager.tensor import Tensor

__all__ = [
    "BlockMask",
    "flex_attention",
    "AuxOutput",
    "AuxRequest",
    "FlexKernelOptions",
    "create_block_mask",
    "create_mask",
    "or_masks",
    "and_masks",
    "noop_mask",
]

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_BACKENDS = ("AUTO", "TRITON", "FLASH", "TRITON_DECODE")


class FlexKernelOptions(TypedDict, total=False):
    """torch's options for its Triton kernels: checked as torch checks them, and they change
    nothing here."""

    num_warps: int
    num_stages: int
    BLOCK_M: int
    BLOCK_N: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    WRITE_DQ: bool
    FORCE_USE_FLEX_ATTENTION: bool
    USE_TMA: bool
    BACKEND: str


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention`` returns."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs asked for (None where not)."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


def _is_score_mod(fn: Callable[..., Any]) -> bool:
    """True for a ``score_mod`` (5 positional arguments), False for a ``mask_mod`` (4)."""
    if hasattr(fn, "__code__"):
        count = fn.__code__.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    else:
        params = inspect.signature(fn).parameters.values()
        count = sum(1 for p in params if p.default is inspect.Parameter.empty)
    if count not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {count}")
    return count == 5


def _vmap_for_bhqkv(fn: Callable[..., Tensor], prefix: tuple[int | None, ...]) -> Callable:
    """``fn`` of scalars mapped over (b, h, q_idx, kv_idx), the score (``prefix`` (0,)) over
    all four, as torch maps it."""
    for dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None)):
        fn = vmap(fn, in_dims=prefix + dims)
    return vmap(fn, in_dims=prefix + (0, None, None, None))


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """A ``mask_mod`` that masks nothing."""
    return batch.new_ones((), dtype=dt.bool_)


def _combined(mask_mods, start: bool, combine, name: str) -> _mask_mod_signature:
    """A ``mask_mod`` folding ``mask_mods``' answers with ``combine`` from ``start``."""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_full((), start, dtype=dt.bool_)
        for mod in mask_mods:
            result = combine(result, mod(b, h, q_idx, kv_idx))
        return result

    mask.__name__ = mask.__qualname__ = name
    return mask


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A ``mask_mod`` allowing what any of ``mask_mods`` allows."""
    return _combined(mask_mods, False, operator.or_, "or_mask")


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A ``mask_mod`` allowing what all of ``mask_mods`` allow."""
    return _combined(mask_mods, True, operator.and_, "and_mask")


def _sliced_mask_mod_error(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor):
    """The ``mask_mod`` of a sliced BlockMask: it raises, as torch's."""
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask using [], "
        "the mask_mod attribute is reset. You must set it from the original BlockMask's "
        "mask_mod."
    )


def _ordered_to_dense(num_blocks: Tensor, indices: Tensor, num_cols: int) -> Tensor:
    """The int32 (..., rows, num_cols) grid with 1 at the first ``num_blocks`` of each row's
    ``indices``."""
    listed = arange(indices.shape[-1]) < num_blocks.unsqueeze(-1)
    hits = (indices.unsqueeze(-1) == arange(num_cols)) & listed.unsqueeze(-1)
    return hits.any(-2).to(dt.int32)


def _dense_to_ordered(dense: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's count of blocks and their columns first (ascending), then the rest."""
    dense = dense.to(dt.int32)
    order = argsort(dense, dim=-1, descending=True, stable=True)
    return dense.sum(-1).to(dt.int32), order.to(dt.int32)


def _transpose_ordered(num_blocks: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    dense = _ordered_to_dense(num_blocks, indices, indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _adjust_num_blocks_and_indices(num_blocks, indices, new_num_rows, new_num_cols):
    indices = indices[:, :, :new_num_rows, :new_num_cols]
    num_blocks = num_blocks[:, :, :new_num_rows]
    num_blocks = where(num_blocks < new_num_cols, num_blocks, new_num_cols)
    num_blocks = (indices < num_blocks[:, :, :, None]).sum(-1).to(dt.int32)
    return num_blocks, indices


class BlockMask:
    """torch's block-sparse mask: per (batch, head) and row of ``BLOCK_SIZE[0]`` queries, the
    count and columns of its blocks of ``BLOCK_SIZE[1]`` keys: partial ones (``kv_*``,
    where ``mask_mod`` decides each position) and full ones (``full_kv_*``); ``q_*`` and
    ``full_q_*`` are the same per column, for torch's backward kernels."""

    def __init__(
        self,
        seq_lengths: tuple[int, int],
        kv_num_blocks: Tensor,
        kv_indices: Tensor,
        full_kv_num_blocks: Tensor | None,
        full_kv_indices: Tensor | None,
        q_num_blocks: Tensor | None,
        q_indices: Tensor | None,
        full_q_num_blocks: Tensor | None,
        full_q_indices: Tensor | None,
        BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE),
        mask_mod: _mask_mod_signature = noop_mask,
    ) -> None:
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted"
            )
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError(
                "full_q_num_blocks and full_q_indices must be both provided or omitted"
            )
        self.seq_lengths = seq_lengths
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        self.BLOCK_SIZE = BLOCK_SIZE
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(
        cls,
        kv_num_blocks: Tensor,
        kv_indices: Tensor,
        full_kv_num_blocks: Tensor | None = None,
        full_kv_indices: Tensor | None = None,
        BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
        mask_mod: _mask_mod_signature | None = None,
        seq_lengths: tuple[int, int] | None = None,
        compute_q_blocks: bool = True,
    ) -> BlockMask:
        """A BlockMask from its ``kv_*`` (and ``full_kv_*``) blocks; ``q_*`` derived."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted"
            )
        q_num_blocks = q_indices = full_q_num_blocks = full_q_indices = None
        if compute_q_blocks:
            q_num_blocks, q_indices = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None and full_kv_indices is not None:
                full_q_num_blocks, full_q_indices = _transpose_ordered(
                    full_kv_num_blocks, full_kv_indices
                )
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            rows, cols = kv_indices.shape[-2:]
            seq_lengths = (rows * BLOCK_SIZE[0], cols * BLOCK_SIZE[1])
        return cls(
            seq_lengths,
            kv_num_blocks,
            kv_indices,
            full_kv_num_blocks,
            full_kv_indices,
            q_num_blocks,
            q_indices,
            full_q_num_blocks,
            full_q_indices,
            BLOCK_SIZE=BLOCK_SIZE,
            mask_mod=noop_mask if mask_mod is None else mask_mod,
        )

    def as_tuple(self, flatten: bool = True) -> tuple[Any, ...]:
        """The fields in torch's order (its FLASH backward's ``dq_*`` ones None)."""
        seq = self.seq_lengths if flatten else (self.seq_lengths,)
        block = self.BLOCK_SIZE if flatten else (self.BLOCK_SIZE,)
        return (
            *seq,
            self.kv_num_blocks,
            self.kv_indices,
            self.full_kv_num_blocks,
            self.full_kv_indices,
            self.q_num_blocks,
            self.q_indices,
            self.full_q_num_blocks,
            self.full_q_indices,
            None,
            None,
            None,
            None,
            *block,
            self.mask_mod,
        )

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.kv_indices.shape[:-2]) + tuple(self.seq_lengths)

    def __str__(self) -> str:
        mask = self.to_string().strip()
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n{mask}\n)"

    def __getitem__(self, index) -> BlockMask:
        """The mask of the (batch, head, row) entries ``index`` picks; an int keeps its
        dimension, as torch's, and the result's ``mask_mod`` raises."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        index = tuple(
            (slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1))
            if isinstance(i, int)
            else i
            for i, n in zip(padded, self.kv_num_blocks.shape[:3], strict=True)
        )
        full_num, full_idx = self.full_kv_num_blocks, self.full_kv_indices
        return BlockMask.from_kv_blocks(
            self.kv_num_blocks[index],
            self.kv_indices[index],
            None if full_num is None else full_num[index],
            None if full_idx is None else full_idx[index],
            BLOCK_SIZE=self.BLOCK_SIZE,
            mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths,
            compute_q_blocks=self.q_indices is not None,
        )

    def __repr__(self) -> str:
        def shape_or_none(x):
            return None if x is None else x.shape

        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (
            f"BlockMask(\n"
            f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
            f"    kv_indices={self.kv_indices.shape},\n"
            f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
            f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
            f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
            f"    q_indices={shape_or_none(self.q_indices)},\n"
            f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
            f"    full_q_indices={shape_or_none(self.full_q_indices)},\n"
            f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
            f"    shape={self.shape},\n"
            f"    sparsity={self.sparsity():.2f}%,\n"
            f"    mask_mod={name}\n"
            f")"
        )

    def _adjust(self, new_q_len: int, new_kv_len: int) -> BlockMask:
        """The mask cropped (at its top left) to ``new_q_len`` x ``new_kv_len``."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])
        num, idx = _adjust_num_blocks_and_indices(self.kv_num_blocks, self.kv_indices, rows, cols)
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None and self.full_kv_indices is not None:
            full_num, full_idx = _adjust_num_blocks_and_indices(
                self.full_kv_num_blocks, self.full_kv_indices, rows, cols
            )
        return self.from_kv_blocks(
            num,
            idx,
            full_num,
            full_idx,
            BLOCK_SIZE=self.BLOCK_SIZE,
            mask_mod=self.mask_mod,
            seq_lengths=(new_q_len, new_kv_len),
            compute_q_blocks=self.q_indices is not None,
        )

    def numel(self) -> int:
        """The number of positions, sparsity aside."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """The percentage of positions in no block."""
        blocks = self.kv_num_blocks.sum().item()
        if self.full_kv_num_blocks is not None:
            blocks += self.full_kv_num_blocks.sum().item()
        return 100 * (1 - blocks * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to_dense(self) -> Tensor:
        """The int32 (..., rows, columns) grid of blocks, partial and full: 1 where one is."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is None or self.full_kv_indices is None:
            return dense
        width = self.full_kv_indices.shape[-1]
        return dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices, width)

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """The grid of blocks drawn per (batch, head), the first ``limit`` of them, at most
        ``grid_size`` cells (-1: one per block): █ where a cell's blocks are all there, ░
        where some are."""
        dense = self.to_dense()
        *batch_dims, num_rows, num_cols = dense.shape
        if grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-num_rows // max_rows))
        col_step = max(1, -(-num_cols // max_cols))

        def summarize(section: Tensor) -> str:
            share = section.float().mean().item()
            return "█" if share == 1 else " " if share == 0 else "░"

        def draw(batch_idx: tuple[int, ...]) -> str:
            grid = dense[batch_idx]
            lines = [
                "".join(
                    summarize(grid[r : r + row_step, c : c + col_step]) * 2
                    for c in range(0, num_cols, col_step)
                )
                for r in range(0, num_rows, row_step)
            ]
            return f"{batch_idx}\n" + "".join(line + "\n" for line in lines)

        drawn = []
        for i, batch_idx in enumerate(itertools.product(*[range(n) for n in batch_dims])):
            if i == limit:
                drawn += [
                    "...",
                    "To print out more, set BlockMask.to_string(limit=N)",
                    "You can also index (BlockMask[batch, head]) to choose a specific "
                    "batch or head",
                ]
                break
            drawn.append(draw(batch_idx))
        return "\n".join(drawn)

    def to(self, device) -> BlockMask:
        """The mask with its tensors on ``device``."""

        def move(x):
            return None if x is None else x.to(device)

        return BlockMask(
            self.seq_lengths,
            self.kv_num_blocks.to(device),
            self.kv_indices.to(device),
            move(self.full_kv_num_blocks),
            move(self.full_kv_indices),
            move(self.q_num_blocks),
            move(self.q_indices),
            move(self.full_q_num_blocks),
            move(self.full_q_indices),
            BLOCK_SIZE=self.BLOCK_SIZE,
            mask_mod=self.mask_mod,
        )


def _convert_mask_to_block_mask(mask, Q_BLOCK_SIZE, KV_BLOCK_SIZE, separate_full_blocks):
    """The int8 (B, H, rows, columns) grids of partial and full blocks (None: no split)."""
    if mask.dtype != dt.bool_:
        raise AssertionError(f"mask.dtype must be torch.bool, got {mask.dtype}")
    while mask.dim() < 4:
        mask = mask.unsqueeze(0)
    q_len, kv_len = mask.shape[-2:]
    mask = pad(mask, (0, -kv_len % KV_BLOCK_SIZE, 0, -q_len % Q_BLOCK_SIZE))
    B, H, Q, KV = mask.shape
    mask = mask.view(B, H, Q // Q_BLOCK_SIZE, Q_BLOCK_SIZE, KV // KV_BLOCK_SIZE, KV_BLOCK_SIZE)
    counts = mask.permute(0, 1, 2, 4, 3, 5).sum(dim=[-2, -1])
    if not separate_full_blocks:
        return (counts > 0).to(dt.int8), None
    size = Q_BLOCK_SIZE * KV_BLOCK_SIZE
    partial = (counts > 0) & (counts < size)
    return partial.to(dt.int8), (counts == size).to(dt.int8)


def create_mask(
    mod_fn: _score_mod_signature | _mask_mod_signature,
    B: int | None,
    H: int | None,
    Q_LEN: int,
    KV_LEN: int,
    device=None,
) -> Tensor:
    """The bool (B, H, Q_LEN, KV_LEN) mask of a ``mask_mod``, or where a ``score_mod`` of
    zero scores is not -inf."""
    B = 1 if B is None else B
    H = 1 if H is None else H
    b, h, m, n = (arange(size, device=device) for size in (B, H, Q_LEN, KV_LEN))
    if _is_score_mod(mod_fn):
        scores = zeros(B, H, Q_LEN, KV_LEN, device=device)
        return ~_vmap_for_bhqkv(mod_fn, (0,))(scores, b, h, m, n).isneginf()
    return _vmap_for_bhqkv(mod_fn, ())(b, h, m, n)


def create_block_mask(
    mask_mod: _mask_mod_signature,
    B: int | None,
    H: int | None,
    Q_LEN: int,
    KV_LEN: int,
    device=None,
    BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
    _compile: bool = False,
    separate_full_blocks: bool = True,
) -> BlockMask:
    """The BlockMask of ``mask_mod`` (``B``, ``H`` None: 1, broadcast): blocks where it
    allows something, full ones (``separate_full_blocks``) where it allows everything."""
    if _is_score_mod(mask_mod):
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    B = 1 if B is None else B
    H = 1 if H is None else H
    q_block, kv_block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    if _compile:
        warnings.warn(
            "_compile flag on create_block_mask was originally added to work around a "
            "torch.compile limitation. That limitation has since been addressed. So, to "
            "compile create_block_mask, we suggest doing torch.compile(create_block_mask). "
            "This still works for now, but will be removed in the future.",
            DeprecationWarning,
            stacklevel=2,
        )
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _convert_mask_to_block_mask(mask, q_block, kv_block, separate_full_blocks)
    kv_num_blocks, kv_indices = _dense_to_ordered(partial)
    full_num = full_idx = None
    if full is not None:
        full_num, full_idx = _dense_to_ordered(full)
    return BlockMask.from_kv_blocks(
        kv_num_blocks,
        kv_indices,
        full_num,
        full_idx,
        BLOCK_SIZE=(q_block, kv_block),
        mask_mod=mask_mod,
        seq_lengths=(Q_LEN, KV_LEN),
    )


def _blocks_at(num_blocks, indices, rows: Tensor, cols: Tensor, num_cols: int) -> Tensor:
    """Whether each (row position, column position) lies in one of the listed blocks."""
    dense = _ordered_to_dense(num_blocks, indices, num_cols).to(dt.bool_)
    return dense.index_select(-2, rows).index_select(-1, cols)


def _allowed(block_mask: BlockMask, b, h, m, n) -> Tensor:
    """Where the query of ``m`` may attend to the key of ``n``: in a full block, or in a
    partial one where ``mask_mod`` allows it, as torch's kernels decide."""
    q_block, kv_block = block_mask.BLOCK_SIZE
    rows, cols = m // q_block, n // kv_block
    num_cols = -(-n.shape[0] // kv_block)
    partial = _blocks_at(block_mask.kv_num_blocks, block_mask.kv_indices, rows, cols, num_cols)
    allowed = partial & _vmap_for_bhqkv(block_mask.mask_mod, ())(b, h, m, n)
    if block_mask.full_kv_num_blocks is None:
        return allowed
    full_num, full_idx = block_mask.full_kv_num_blocks, block_mask.full_kv_indices
    return allowed | _blocks_at(full_num, full_idx, rows, cols, num_cols)


def _check(query, key, value, block_mask, enable_gqa) -> None:
    """torch's checks of the operands, with its errors."""
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise ValueError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {query.dim()}, key.dim: {key.dim()} and value.dim: {value.dim()} "
            "instead."
        )
    if query.size(-1) != key.size(-1):
        raise ValueError(
            "Expect query and key/value to have the same embedding dimension but got "
            f"E={query.size(-1)} and E={key.size(-1)}."
        )
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    hq, hkv = query.size(1), key.size(1)
    if not enable_gqa and hq != hkv:
        raise ValueError(
            "Expect query and key/value to have the same number of heads but got "
            f"Hq={hq} and Hkv={hkv}. Try setting enable_gqa=True for GQA."
        )
    if enable_gqa and hq % hkv != 0:
        raise ValueError(
            "Expect number of query heads to be a multiple of kv heads for GQA but got "
            f"Hq={hq} and Hkv={hkv}."
        )
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(
                "Expect query and key/value to have the same batch size, or non-none "
                f"block_mask, but got block_mask=None, Bq={query.size(0)}, and "
                f"Bkv={key.size(0)}."
            )
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(
                "Expect query and key/value to have the same batch size, or block_mask and "
                f"query to have the same batch size, but got Bq={query.size(0)}, "
                f"Bkv={key.size(0)}, B_block_mask={block_mask.kv_num_blocks.size(0)}."
            )
        if key.size(0) != 1:
            raise RuntimeError(
                f"Bq and Bkv must broadcast. Got Bq={query.size(0)} and Bkv={key.size(0)}"
            )
    if block_mask is not None:
        _check_lengths(block_mask, query.size(-2), key.size(-2))


def _check_lengths(block_mask: BlockMask, q_len: int, kv_len: int) -> None:
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    mask_q, mask_kv = block_mask.shape[-2:]
    found = (
        f"block_mask was created for block_mask.shape={block_mask.shape} but got "
        f"q_len={q_len} and kv_len={kv_len}. "
    )
    if q_len > mask_q or kv_len > mask_kv:
        raise ValueError(
            found + "As the block mask was created for a smaller length than you're using "
            "it for, you likely need to create a new block mask."
        )
    if q_len < mask_q or kv_len < mask_kv:
        raise ValueError(
            found + "As the block mask was created for a larger length than you're using it "
            "for, you can either 1. create a new block mask with the correct length, or 2. "
            "'adjust' the existing block mask to the correct length by calling "
            "block_mask._adjust(q_len, kv_len). This essentially 'crops' the block mask to "
            "the upper left corner, which does not work for all mask_mods!"
        )


def _check_kernel_options(kernel_options, want_max: bool) -> None:
    options = kernel_options or {}
    if "BACKEND" in options and options.get("FORCE_USE_FLEX_ATTENTION", False):
        raise RuntimeError(
            "BACKEND cannot be combined with legacy FORCE_USE_FLEX_ATTENTION. BACKEND "
            "supersedes the legacy knob; please drop FORCE_USE_FLEX_ATTENTION and only "
            "specify the desired BACKEND."
        )
    backend = options.get("BACKEND", "AUTO")
    if backend not in _BACKENDS:
        raise ValueError(f"Invalid BACKEND value '{backend}'. Must be one of {_BACKENDS}")
    if backend == "FLASH" and want_max:
        raise NotImplementedError(
            "Returning max scores is not supported with BACKEND='FLASH'. "
            "Use return_aux=AuxRequest(lse=True) or omit max_scores."
        )


def _attend(query, key, value, score_mod, block_mask, scale):
    """torch's ``math_attention``: the output, the lse and the (non-differentiable) row
    maxima of the modified scores."""
    work = dt.float64 if query.dtype == dt.float64 else dt.float32
    B, H, q_len = query.shape[:3]
    groups = H // key.size(1)
    key = repeat_interleave(key, groups, dim=1).expand(B, -1, -1, -1)
    value = repeat_interleave(value, groups, dim=1).expand(B, -1, -1, -1)
    scores = (query.to(work) @ key.to(work).transpose(-2, -1)) * scale
    b, h, m, n = (arange(size) for size in (B, H, q_len, key.size(-2)))
    if score_mod is not None:
        scores = _vmap_for_bhqkv(score_mod, (0,))(scores, b, h, m, n)
    if block_mask is not None:
        scores = where(_allowed(block_mask, b, h, m, n), scores, float("-inf"))
    # softmax and logsumexp from one shifted exp; a row of nothing but -inf (masked out)
    # gets probabilities 0 and lse -inf, with no NaN in the gradients
    top = scores.amax(-1, keepdim=True)
    empty = top.isneginf()
    shift = where(empty, 0.0, top).detach()
    exp = (scores - shift).exp()
    total = where(empty, 1.0, exp.sum(-1, keepdim=True))
    out = (exp / total).to(query.dtype) @ value.to(query.dtype)
    lse = where(empty, float("-inf"), total.log() + shift).squeeze(-1)
    return out, lse, top.squeeze(-1).detach()


def flex_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    score_mod: _score_mod_signature | None = None,
    block_mask: BlockMask | None = None,
    scale: float | None = None,
    enable_gqa: bool = False,
    return_lse: bool = False,
    kernel_options: FlexKernelOptions | None = None,
    *,
    return_aux: AuxRequest | None = None,
):
    """Attention of ``query`` (B, Hq, L, E) to ``key`` (B, Hkv, S, E) and ``value``
    (B, Hkv, S, Ev), its scores (times ``scale``, default 1/sqrt(E)) changed by
    ``score_mod(score, b, h, q_idx, kv_idx)`` and masked by ``block_mask``; with
    ``enable_gqa`` each key head serves Hq/Hkv query heads. Returns the (B, Hq, L, Ev)
    output, with ``AuxOutput`` when ``return_aux`` asks for it (or the lse, for the
    deprecated ``return_lse``)."""
    _check(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise ValueError(
            "Cannot specify both return_lse and return_aux. return_lse is deprecated, please "
            "use return_aux=AuxRequest(lse=True) instead."
        )
    if return_lse:
        warnings.warn(
            "return_lse is deprecated and will be removed in v2.10. Please use "
            "return_aux=AuxRequest(lse=True) instead.",
            FutureWarning,
            stacklevel=2,
        )
    _check_kernel_options(kernel_options, return_aux is not None and return_aux.max_scores)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    out, lse, max_scores = _attend(query, key, value, score_mod, block_mask, scale)
    if return_aux is not None:
        return out, AuxOutput(
            lse=lse if return_aux.lse else None,
            max_scores=max_scores if return_aux.max_scores else None,
        )
    return (out, lse) if return_lse else out
