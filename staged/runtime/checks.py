"""The index checks of compiled and deployed steps (Note [index checks] in
``staged/autodiff/indexing.py``): a step returns a report (k int64, 0 where fine) beside
its results; a failed check raises its error when a result of that call is read, and once
at a later call: the first made after the bad call has finished (without waiting for it, so
steps stay asynchronous; calls in flight are bounded, so at most ``MAX_IN_FLIGHT`` calls
later). The call that raises is dropped; the step itself already kept the old state where a
check failed, so calls in between trained from it as if the bad call had not happened."""

from __future__ import annotations

import numpy as np

from ..autodiff.indexing import ERRORS, report_value


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
                    self.failure = (ERRORS[error], message.format(report_value(key, lo, hi)))
                    break
        return self.failure

    def __call__(self) -> None:
        """Raise the failure on reading a result of the call (``DeviceValue.check``)."""
        failure = self._read()
        if failure is not None:
            self.reported = True
            raise failure[0](failure[1])

    def done(self) -> bool:
        """Whether the call has finished (its report can be read without waiting)."""
        ready = None if self.report is None else self.report.ready
        return ready is None or ready[0].query() >= ready[1]

    def raise_unreported(self) -> None:
        """Raise the failure at a later call, unless a read already raised it."""
        if not self.reported:
            self()


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

    def track(self, report, results) -> None:
        """Make this call's ``results`` (DeviceValues) raise its failure when read."""
        check = StepCheck(report, self.rows)
        self.pending.append(check)
        for r in results:
            r.check = check
