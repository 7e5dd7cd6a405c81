"""The index checks of compiled and deployed steps (Note [index checks] in
``staged/autodiff/indexing.py``): a step returns a report (k x [bad, value], int64) beside
its results; a failed check raises its error when a result of that call is read, and once
at the next call. (The step itself already kept the old state where a check failed.)"""
from __future__ import annotations

import numpy as np

from ..autodiff.indexing import ERRORS


class StepCheck:
    """One call's report, read (waiting for the call) the first time it is needed."""

    __slots__ = ("report", "rows", "failure", "reported")

    def __init__(self, report, rows):
        self.report, self.rows = report, rows
        self.failure = None   # (error class, message) of the first failed check
        self.reported = False

    def _read(self):
        if self.report is not None:
            table = np.asarray(self.report).reshape(-1, 2)
            self.report = None
            for (bad, value), (error, message) in zip(table, self.rows):
                if bad:
                    self.failure = (ERRORS[error], message.format(int(value)))
                    break
        return self.failure

    def __call__(self) -> None:
        """Raise the failure on reading a result of the call (``DeviceValue.check``)."""
        failure = self._read()
        if failure is not None:
            self.reported = True
            raise failure[0](failure[1])

    def raise_unreported(self) -> None:
        """Raise the failure at the next call, unless a read already raised it."""
        failure = self._read()
        if failure is not None and not self.reported:
            self.reported = True
            raise failure[0](failure[1])


class Checks:
    """The checks of one step across its calls."""

    def __init__(self, rows):
        self.rows = list(rows)
        self.last = None

    def raise_pending(self) -> None:
        """Raise the last call's failure (waiting for that call) if nothing reported it."""
        last, self.last = self.last, None
        if last is not None:
            last.raise_unreported()

    def track(self, report, results) -> None:
        """Make this call's ``results`` (DeviceValues) raise its failure when read."""
        self.last = check = StepCheck(report, self.rows)
        for r in results:
            r.check = check
