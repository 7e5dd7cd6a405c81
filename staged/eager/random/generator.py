"""torch's CPU generator: ``std::mt19937`` plus the second normal it caches.

The engine is NumPy's MT19937 bit generator in the state torch's ``manual_seed`` puts
``std::mt19937`` in (``init_genrand`` of the seed's low 32 bits, then a twist at the
first draw): its 32-bit words are torch's ``random()``, two of them its ``random64()``
(shared/notes/RNG.md). ``get_state`` writes torch's own 5056-byte layout, so states move
between the two libraries.

Note [one draw at a time]: torch's CPU kernels hold the generator's mutex for a whole
fill, so threads drawing from one generator each get a run of the stream, as some serial
order of their draws would. A fill here is several calls of the bit generator (a normal
tensor's uniforms chunk by chunk; the serial path's cached sine, read then written), and
another thread could draw between them: two threads would share or skip part of the
stream (seen: randn from two threads repeating values). ``drawn`` holds ``gen.lock``
around the fill, as a compiled call does around each of its host draws
(``tracing/draws.py``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._locks import fork_safe
from ..._where import sited
from ..interceptor import current_interceptor
from ..tensor import Tensor
from . import counter

N = 624  # mt19937's words of state
DEFAULT_SEED = 67280421310721  # torch.Generator()'s seed
# torch's CPUGeneratorImplState; the normal_x/normal_rho/float-normal fields are unused
STATE = np.dtype(
    [
        ("seed", "<u8"),
        ("left", "<i4"),
        ("seeded", "<i4"),
        ("next", "<u8"),
        ("state", "<u8", N),
        ("normal_x", "<f8"),
        ("normal_y", "<f8"),
        ("normal_rho", "<f8"),
        ("normal_is_valid", "<i4"),
        ("pad", "V4"),
        ("float_normal", "<f4"),
        ("float_normal_is_valid", "u1"),
        ("pad2", "V3"),
    ]
)


@functools.lru_cache(maxsize=16)
def init_genrand(seed32: int) -> np.ndarray:
    """mt19937's state after seeding with ``seed32`` (before its first twist), read-only:
    a program seeding again and again with the same seed (a test suite, a loop of
    experiments) pays the 624 Python steps once."""
    key = [seed32]
    for i in range(1, N):
        key.append((1812433253 * (key[-1] ^ (key[-1] >> 30)) + i) & 0xFFFFFFFF)
    out = np.array(key, np.uint32)
    out.flags.writeable = False
    return out


def _check_seed(seed) -> int:
    if isinstance(seed, (bool, float, str, Tensor)) or seed is None:  # (int() takes them)
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    if isinstance(seed, np.integer):  # torch unpacks only a Python int
        raise TypeError("an integer is required")
    seed = int(seed)
    if not -(2**63) <= seed < 2**64:
        raise ValueError("Overflow when unpacking long long")
    return seed & (2**64 - 1)  # negative seeds wrap, as torch's


def _event(gen: Generator, kind: str, arg) -> None:
    """Tell a trace that records generator state changes (Note [host draws] in
    ``tracing/draws.py``) that ``gen``'s state is read, set or seeded."""
    icpt = current_interceptor()
    if icpt is not None:
        icpt.rng_event(gen, kind, arg)


class Generator:
    """``torch.Generator`` on the CPU: the same stream after the same seed."""

    normal_cache: float | None

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise RuntimeError(f"staged has only the CPU generator, not {device!r}")
        self.device = "cpu"
        self.lock = fork_safe(threading.RLock())  # Note [one draw at a time]
        self.bit_generator = np.random.MT19937()
        self._words = np.random.Generator(self.bit_generator)
        self.manual_seed(DEFAULT_SEED)

    def __getstate__(self) -> dict:  # copied and pickled as torch's are; the lock is new
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, lock=fork_safe(threading.RLock()))

    @sited
    def manual_seed(self, seed) -> Generator:
        """Seed the stream (torch's seeds ``s`` and ``s + 2**32`` give one stream) and
        forget the cached normal."""
        self._seed = _check_seed(seed)
        _event(self, "seed", self._seed)
        return self._start()

    def seed(self) -> int:
        """Seed from the OS's entropy (53 bits, as torch); returns the seed. Inside a
        compiled step each call seeds anew (Note [host draws])."""
        self._seed = int.from_bytes(os.urandom(8), "little") & (2**53 - 1)
        _event(self, "seed", None)
        self._start()
        return self._seed

    def _start(self) -> Generator:
        """The stream of ``self._seed`` from its beginning."""
        self.bit_generator.state = {
            "bit_generator": "MT19937",
            "state": {"key": init_genrand(self._seed & 0xFFFFFFFF), "pos": N},
        }
        self.normal_cache = None  # the second value of the last serial Box-Muller pair
        return self

    def initial_seed(self) -> int:
        return self._seed

    def swap_state(self, other: Generator) -> None:
        """Exchange states with ``other``."""
        with self.lock:
            for k in ("bit_generator", "_words", "_seed", "normal_cache"):
                mine = getattr(self, k)
                setattr(self, k, getattr(other, k))
                setattr(other, k, mine)

    def get_state(self) -> Tensor:
        """The state as a uint8 tensor in torch's layout (``torch.Generator.get_state``)."""
        st = self.bit_generator.state["state"]
        rec = np.zeros((), STATE)
        rec["seed"], rec["seeded"] = self._seed, 1
        rec["left"], rec["next"] = N + 1 - st["pos"], st["pos"]
        if st["pos"] == N and np.array_equal(st["key"], init_genrand(self._seed & 0xFFFFFFFF)):
            rec["next"] = 0  # Note [a fresh seed's state]
        rec["state"] = st["key"]
        if self.normal_cache is not None:
            rec["normal_y"], rec["normal_is_valid"] = self.normal_cache, 1
        state = Tensor._wrap(np.frombuffer(rec.tobytes(), np.uint8).copy(), False)
        _event(self, "get", state)
        return state

    # Note [a fresh seed's state]: NumPy keeps one position (624) for "twist at the next
    # draw", where std::mt19937 has two: ``next`` 0 after seeding and 624 after the last
    # word of a twist. The draws that follow are the same; the bytes of torch's state are
    # told apart by the key, which is untwisted (``init_genrand``'s) only after seeding.

    def set_state(self, new_state) -> Generator:
        """Restore a state from ``get_state`` (here or torch's)."""
        a = new_state._host() if isinstance(new_state, Tensor) else np.asarray(new_state)
        if a.dtype != np.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        if a.size != STATE.itemsize:
            raise RuntimeError(
                f"Expected a CPUGeneratorImplState of size {STATE.itemsize} but "
                f"found the input RNG state size to be {a.size}"
            )
        rec = np.frombuffer(np.ascontiguousarray(a).tobytes(), STATE)[0]
        if not (rec["seeded"] and 0 < rec["left"] <= N and rec["next"] <= N):
            raise RuntimeError("Invalid mt19937 state")
        _event(self, "set", new_state)
        self.bit_generator.state = {
            "bit_generator": "MT19937",
            "state": {"key": rec["state"].astype(np.uint32), "pos": N + 1 - int(rec["left"])},
        }
        self._seed = int(rec["seed"])
        self.normal_cache = float(rec["normal_y"]) if rec["normal_is_valid"] else None
        return self

    def host_state(self) -> tuple:
        """The state as Python objects, cheaply (what ``load_host_state`` takes back)."""
        return self.bit_generator.state, self._seed, self.normal_cache

    def load_host_state(self, state: tuple) -> None:
        self.bit_generator.state, self._seed, self.normal_cache = state

    def random(self, n: int) -> np.ndarray:
        """``n`` draws of torch's ``random()``: uint32 words."""
        return self._words.integers(0, 2**32, size=n, dtype=np.uint32)

    def random64(self, n: int) -> np.ndarray:
        """``n`` draws of torch's ``random64()``: two words each, the first high, which is
        NumPy's ``next_uint64`` for MT19937 (what a full-range ``integers`` returns:
        several times faster than rotating pairs of ``random()``)."""
        return self._words.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)

    def uniform(self, n: int, dtype) -> np.ndarray:
        """``n`` uniforms in [0, 1): float32 from 24 bits of ``random()``, float64 from 53
        bits of ``random64()`` (in place, through int views: NumPy converts signed
        integers to floats several times faster than unsigned ones)."""
        if np.dtype(dtype) == np.float64:
            r = self.random64(n)
            r &= np.uint64(2**53 - 1)
            out = r.view(np.int64).astype(np.float64)
            out *= 2.0**-53
            return out
        return self.uniform32(n)

    def uniform32(self, n: int) -> np.ndarray:
        """``n`` float32 uniforms, ``(random() & 0xFFFFFF) * 2**-24``."""
        r = self.random(n)
        r &= np.uint32(0xFFFFFF)
        out = r.view(np.int32).astype(np.float32)
        out *= np.float32(2**-24)
        return out


default_generator = Generator()


# fn(what, shape, like=None) -> (shape, wrap) before each draw, installed while vmap runs:
# its randomness check, and with randomness="different" the batch dims a draw gets
# (``shape`` None: a draw that cannot take them), or for one that fills ``like`` or is
# made like it an array laid out as the draw is to be filled, and ``wrap``, which makes
# the result batched
on_draw: list[Callable[..., Any]] = []


def drawn(generator, what: str, shape, dtype, fill, in_graph=None, like=None) -> Tensor:
    """A new tensor of ``shape`` and ``dtype`` (a staged dtype) holding ``fill(gen,
    shape)``'s array, drawn now from ``generator`` (None: the default one). Under capture
    the tracer's stand-in for that draw, which each compiled call makes on the host (Note
    [host draws]); where the trace keeps draws in the graph (``rng="counter"``),
    ``in_graph()`` for the default generator, else the array drawn now and frozen in.
    ``like``: the tensor the draw fills (or is made like), for the hooks; where one gives
    a layout (an array), ``fill`` gets an empty array of ``dtype`` laid out so."""
    shape, wrap = tuple(shape), None
    for hook in on_draw:
        shape, wrap = hook(what, shape, like)
    if type(shape) is np.ndarray:  # order "K": the layout's order of dims in memory
        layout = np.empty_like(shape, dtype.np)
        shape, fill = layout.shape, lambda gen, s, fill=fill: fill(gen, layout)
    gen = default_generator if generator is None else generator
    icpt = current_interceptor()
    t = None
    if icpt is not None:
        p = icpt.host_draw(gen, what, shape, dtype, fill)
        if p is not None:
            t = Tensor._wrap(p, False)
        elif in_graph is not None and generator is None and wrap is None:
            return in_graph()
        else:
            icpt.impure(what)
    if t is None:
        with gen.lock:  # Note [one draw at a time]
            t = Tensor._wrap(fill(gen, shape), False)
    return t if wrap is None else wrap(t)


def locked(fill, gen: Generator, *args):
    """``fill(gen, *args)`` with ``gen``'s lock held: a fill made outside ``drawn``, which
    holds it as torch's kernel holds the generator's mutex (Note [one draw at a time])."""
    with gen.lock:
        return fill(gen, *args)


def resolve(generator, what: str) -> Generator:
    """``generator``, or the default one for None; under capture, first tell the tracer
    that ``what`` makes a tensor the graph will hold as a constant (Note [impure calls])."""
    for hook in on_draw:
        hook(what, None)
    icpt = current_interceptor()
    if icpt is not None:
        icpt.impure(what)
    return default_generator if generator is None else generator


@sited
def manual_seed(seed) -> Generator:
    """Seed the default generator and the counter-based one behind compiled dropout."""
    counter.reseed(default_generator.manual_seed(int(seed)).initial_seed())  # int(): torch's
    return default_generator


def seed() -> int:
    """Seed the default generator (and the counter-based one) from the OS's entropy."""
    s = default_generator.seed()
    counter.reseed(s)
    return s


def initial_seed() -> int:
    return default_generator.initial_seed()


def new_process_state() -> tuple:
    """A state of what ``manual_seed`` seeds, apart from the process's (the default
    generator's and the counter-based one's), for ``swap_process_state``."""
    return Generator(), np.zeros(2, np.int64)


def swap_process_state(state: tuple) -> tuple:
    """Put ``state`` (``new_process_state``'s, or what this returned) in place of the
    default generator's and the counter-based one's states; returns theirs, in the same
    form. Objects are exchanged, not words: a call costs a microsecond."""
    gen, pair = state
    default_generator.swap_state(gen)
    return gen, counter.swap(pair)


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, device_type="cuda"):
    """Restore the default generator's state on exit (``torch.random.fork_rng``; there are
    no device generators to fork)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


seed()
