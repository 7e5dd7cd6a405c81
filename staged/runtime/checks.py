"""The index checks of compiled and deployed steps (Note [index checks] in
``staged/autodiff/indexing.py``): a step returns a report (k int64, 0 where fine) beside
its results; a failed check raises its error when a result of that call is read, and once
at a later call: the first made after the bad call has finished (without waiting for it, so
steps stay asynchronous; calls in flight are bounded, so at most ``MAX_IN_FLIGHT`` calls
later). The call that raises is dropped; the step itself already kept the old state where a
check failed, so calls in between trained from it as if the bad call had not happened. A
step that changes the shape of an argument in place (``x.unsqueeze_(0)``) waits for its
report at every call: the caller's tensor takes its new shape then, or keeps the value and
shape it came in with where a check failed.

Where a backend holds int64 in int32, its module checks for int64 results that wrapped
(Note [int64 held in int32] in ``lower/mlir/overflow.py``): one more row, of a message per
checked op, the report's key picking it."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from .. import dtypes as dt
from ..autodiff.avals import Aval
from ..autodiff.indexing import ERRORS, report_value
from ..lower.mlir.overflow import overflow_row
from ..tracing.ir import Output

_ERRORS = {**ERRORS, "OverflowError": OverflowError}


class StepCheck:
    """One call's report, read (waiting for the call) the first time it is needed."""

    __slots__ = ("report", "rows", "failure", "reported")

    def __init__(self, report, rows):
        self.report, self.rows = report, rows
        self.failure = None  # (error class, message) of the first failed check
        self.reported = False

    def _read(self):
        if self.report is not None:
            table = np.asarray(self.report).reshape(-1)
            self.report = None
            for key, (error, message, lo, hi) in zip(table, self.rows):
                if key:
                    text = (
                        message[-int(key)]
                        if isinstance(message, list)
                        else message.format(report_value(key, lo, hi))
                    )
                    self.failure = (_ERRORS[error], text)
                    break
        return self.failure

    def __call__(self) -> None:
        """Raise the failure on reading a result of the call (``DeviceValue.check``)."""
        failure = self._read()
        if failure is not None:
            self.reported = True
            raise failure[0](failure[1])

    def failed(self) -> bool:
        """Whether a check of the call failed, waiting for the call to finish."""
        return self._read() is not None

    def done(self) -> bool:
        """Whether the call has finished (its report can be read without waiting)."""
        ready = None if self.report is None else self.report.ready
        try:
            return ready is None or ready[0].query() >= ready[1]
        except RuntimeError:  # it failed: reading the report raises why, once undone
            return True

    def raise_unreported(self) -> None:
        """Raise the failure at a later call, unless a read already raised it; a note says
        that the call raising it did not run."""
        if not self.reported:
            try:
                self()
            except Exception as err:
                err.add_note(
                    "(raised by an earlier call of this compiled step, whose results were not "
                    "read; that call kept the state it found. This call did not run: call it "
                    "again to run it)"
                )
                raise


class Checks:
    """The checks of one step across its calls."""

    def __init__(self, rows):
        self.rows = list(rows)
        self.pending = []  # StepChecks of earlier calls, oldest first, not yet read

    def raise_pending(self, wait=False) -> None:
        """Raise the failure of an earlier call that has finished (with ``wait``: of every
        earlier call), unless a read already reported it."""
        while self.pending and (wait or self.pending[0].done()):
            self.pending.pop(0).raise_unreported()

    def track(self, report, results) -> StepCheck:
        """Make this call's ``results`` (DeviceValues) raise its failure when read."""
        check = StepCheck(report, self.rows)
        self.pending.append(check)
        for r in results:
            r.check = check
        return check


def with_overflow_checks(captured, int64_checks: bool):
    """``captured`` with the row of its module's int64 overflow checks (where
    ``int64_checks``, ``compiler.lowering_options``) and a ``check`` output to hold them:
    an empty report of its own where the trace had no index checks."""
    row = overflow_row(captured.graph) if int64_checks else None
    if row is None:
        return captured
    g = copy.copy(captured.graph)
    g.outputs, at = list(g.outputs), captured.check_output
    if at < 0:
        v = g.new_value(Aval((0,), dt.int64))
        g.consts = [*g.consts, (v, np.zeros(0, np.int64))]
        g.outputs.append(Output(v, "check", "check"))
        at = len(g.outputs) - 1
    return dataclasses.replace(captured, graph=g, checks=[*captured.checks, row], check_output=at)
