"""``staged.utils.benchmark``: torch.utils.benchmark's ``Timer`` for Python statements,
its ``Measurement`` (median, mean, IQR, the same repr) and ``Compare`` (a table of
medians). ``num_threads`` sets staged's threads (``staged.set_num_threads``) while timing,
1 by default, as torch's does.

Example:
    >>> t = Timer("x @ x", setup="import staged; x = staged.randn(64, 64)")
    >>> t.blocked_autorange(min_run_time=0.05).median > 0
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import textwrap
import timeit
from collections.abc import Callable

import numpy as np

from .._threads import get_num_threads, set_num_threads

__all__ = ["Compare", "Measurement", "TaskSpec", "Timer", "select_unit"]


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What a Timer times (all but its globals)."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (or the one-line statement), with the sub-label."""
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        paren = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{paren}\n{textwrap.indent(self.stmt, '  ')}"

    def summarize(self) -> str:
        if self.setup in ("pass", ""):
            setup = ""
        elif "\n" in self.setup:
            setup = f"setup:\n{textwrap.indent(self.setup, '  ')}"
        else:
            setup = f"setup: {self.setup}"
        parts = [p for p in (self.title, self.description or "", setup) if p]
        return "\n".join(f"{p}\n" if "\n" in p else p for p in parts)


def select_unit(t: float) -> tuple[str, float]:
    """The unit (ns, us, ms or s) in which ``t`` seconds reads as 1 to 999, and its scale."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(np.log10(t) // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


_IQR_WARN, _IQR_GROSS_WARN = 0.1, 0.2  # IQR / median beyond which a Measurement warns


@dataclasses.dataclass(repr=False)
class Measurement:
    """``raw_times``: seconds per block of ``number_per_run`` runs of the statement."""

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict | None = None

    def __getattr__(self, name):
        if name in _TASK_FIELDS:  # m.stmt, m.label, m.num_threads ...
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute '{name}'")

    @property
    def times(self) -> list:
        """Seconds per run, one per block."""
        return [t / self.number_per_run for t in self.raw_times]

    def _quantile(self, q: float) -> float:
        return float(np.quantile(np.asarray(self.times, np.float64), q))

    @property
    def median(self) -> float:
        return self._quantile(0.5)

    @property
    def mean(self) -> float:
        return float(np.mean(self.times))

    @property
    def iqr(self) -> float:
        return self._quantile(0.75) - self._quantile(0.25)

    @property
    def title(self) -> str:
        return self.task_spec.title

    def meets_confidence(self, threshold: float = _IQR_WARN) -> bool:
        return self.iqr / self.median < threshold

    @property
    def _warnings(self) -> list:
        if self.meets_confidence(_IQR_WARN):
            return []
        why = (
            "This suggests significant environmental influence."
            if not self.meets_confidence(_IQR_GROSS_WARN)
            else "This could indicate system fluctuation."
        )
        rel = self.iqr / self.median * 100
        return [
            f"  WARNING: Interquartile range is {rel:.1f}% of the median measurement.\n"
            f"           {why}"
        ]

    @property
    def has_warnings(self) -> bool:
        return bool(self._warnings)

    def __repr__(self) -> str:
        n, med = len(self.raw_times), self.median
        unit, scale = select_unit(med)
        lo, hi = self._quantile(0.25), self._quantile(0.75)
        threads = f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}"
        lines = [
            f"<{type(self).__module__}.Measurement object at {hex(id(self))}>",
            self.task_spec.summarize(),
            f"  {'Median: ' if n > 1 else ''}{med / scale:.2f} {unit}",
        ]
        if n >= 4:
            lines.append(
                f"  IQR:    {(hi - lo) / scale:.2f} {unit} ({lo / scale:.2f} to {hi / scale:.2f})"
            )
        per = "per measurement," if n > 1 else ","
        lines.append(
            f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs {per} {threads}"
        )
        return "\n".join([*lines, *self._warnings]).strip()


_TASK_FIELDS = frozenset(f.name for f in dataclasses.fields(TaskSpec))


@contextlib.contextmanager
def _threads(n: int):
    before = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(before)


class Timer:
    """Time ``stmt`` (after ``setup``, in ``globals``) as torch.utils.benchmark.Timer does:
    ``timeit(number)``, ``blocked_autorange(min_run_time)`` (blocks long enough that the
    timer's own cost is under 0.01 %, for at least ``min_run_time`` seconds) and
    ``adaptive_autorange`` (until the IQR is under ``threshold`` of the median)."""

    def __init__(
        self,
        stmt: str = "pass",
        setup: str = "pass",
        global_setup: str = "",
        timer: Callable[[], float] = timeit.default_timer,
        globals: dict | None = None,  # noqa: A002 (torch's name)
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: str = "python",
    ):
        if str(getattr(language, "name", language)).lower() not in ("python", "py"):
            raise ValueError(f"staged's Timer times Python statements only, not {language}")
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        self._task_spec = TaskSpec(
            stmt, setup, global_setup, label, sub_label, description, env, num_threads
        )
        self._timer = timeit.Timer(
            stmt=textwrap.dedent(stmt).strip() or "pass",
            setup=textwrap.dedent(setup).strip() or "pass",
            timer=timer,
            globals=dict(globals or {}),
        )

    def _timeit(self, number: int) -> float:
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> Measurement:
        """``number`` runs of ``stmt`` in one block (after a warm-up of ``number // 100``)."""
        with _threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return Measurement(number, [self._timeit(number)], self._task_spec)

    def _block_size(self, min_run_time: float) -> int:
        overhead = float(np.median([self._timeit(0) for _ in range(5)]))
        number = 1
        while number * 10 <= 2**31 - 1:
            took = self._timeit(number)
            if (overhead / took <= 1e-4 and took >= min_run_time / 1000) or took > min_run_time:
                break
            number *= 10
        return number

    def _measure(self, min_run_time, max_run_time, stop, callback, block_time) -> Measurement:
        with _threads(self._task_spec.num_threads):
            number = self._block_size(block_time)
            times: list = []
            while True:
                t = self._timeit(number)
                times.append(t)
                if callback:
                    callback(number, t)
                total = sum(times)
                if (total >= min_run_time and stop(number, times)) or (
                    max_run_time and total > max_run_time
                ):
                    return Measurement(number, times, self._task_spec)

    def blocked_autorange(self, callback=None, min_run_time: float = 0.2) -> Measurement:
        """Blocks of the estimated size until ``min_run_time`` seconds have run."""
        return self._measure(min_run_time, None, lambda n, t: True, callback, min_run_time)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback=None,
    ) -> Measurement:
        """Blocks until more than 3 have run, ``min_run_time`` seconds have passed and the
        IQR is under ``threshold`` of the median, or ``max_run_time`` seconds have run."""

        def stop(number, times):
            return len(times) > 3 and Measurement(number, times, self._task_spec).meets_confidence(
                threshold
            )

        return self._measure(min_run_time, max_run_time, stop, callback, 0.05)


class Compare:
    """A table of the medians of ``results`` (Measurements): a section per label, a row per
    sub-label (or statement), a column per description; ``print()`` shows it."""

    def __init__(self, results):
        self._results = list(results)

    def __str__(self) -> str:
        out = []
        for label in dict.fromkeys(m.label for m in self._results):
            group = [m for m in self._results if m.label == label]
            rows = list(dict.fromkeys(m.sub_label or m.stmt for m in group))
            cols = list(dict.fromkeys(m.description or "" for m in group))
            unit, scale = select_unit(min(m.median for m in group))
            cell = {(m.sub_label or m.stmt, m.description or ""): m.median / scale for m in group}
            width = max(len(r) for r in rows)
            head = " " * width + " | " + " | ".join(f"{c:>10}" for c in cols)
            body = [
                f"{r:<{width}} | "
                + " | ".join(f"{cell[r, c]:>10.1f}" if (r, c) in cell else " " * 10 for c in cols)
                for r in rows
            ]
            title = f"[ {label or group[0].stmt} ]"
            out += [
                f"{title:-^{len(head)}}",
                head,
                *body,
                "",
                f"Times are in {_ENGLISH[unit]}s ({unit}).",
                "",
            ]
        return "\n".join(out)

    def print(self) -> None:
        print(str(self))


_ENGLISH = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}
