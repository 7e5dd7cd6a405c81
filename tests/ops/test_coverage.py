"""docs/coverage.md is generated; it must match the op database and registry. Every op the
public-op table exports has an op-database entry."""

from staged.eager.ops.table import OPS
from tests.ops import coverage
from tests.ops.db import OP_DB


def test_coverage_table_is_current():
    assert coverage.PATH.exists() and coverage.PATH.read_text() == coverage.render(), (
        "docs/coverage.md is stale: run `make generated` and commit it"
    )


def test_every_exported_op_has_an_entry():
    """An entry named ``<op>``, ``<op>_<variant>`` or ``complex_<op>`` covers ``staged.<op>``."""
    names = {e.name for e in OP_DB}
    missing = [
        n
        for n, row in OPS.items()
        if row.export
        and not (n in names or f"complex_{n}" in names or any(m.startswith(n + "_") for m in names))
    ]
    assert not missing, f"no op-database entry (tests/ops/db) for {missing}"
