"""docs/coverage.md is generated; it must match the op database and registry."""
from tests.ops import coverage


def test_coverage_table_is_current():
    assert coverage.PATH.exists() and coverage.PATH.read_text() == coverage.render(), \
        "docs/coverage.md is stale: run `python -m tests.ops.coverage` and commit it"
