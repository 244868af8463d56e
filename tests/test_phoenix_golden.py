"""Apache Phoenix CDC goldens: the design document's DDL and query forms and Phoenix's own CDC
tests (CDCQueryIT, CDCDefinitionIT, CDCStreamIT), run through the Python API with a clock that
steps 100 ms before each statement (as Phoenix's tests space their commits), from the
reference's 2024-05-28 09:55:30.123 GMT. Each query prints as sqlline would, with the exact
``"CDC JSON"`` text Phoenix writes (HashMap key order included)."""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed.cli.phoenix_cmd import render_sqlline
from changefeed.sql.parser import parse
from tests.golden_files import read_golden

GOLDEN = sorted((Path(__file__).parent / "golden" / "phoenix").glob("*.sql"))
START_NS = 1_716_890_130_123 * 1_000_000
STEP_NS = 100_000_000


class StepClock:
    def __init__(self) -> None:
        self.now = START_NS

    def now_ns(self) -> int:
        return self.now


def run_golden(path: Path, db: Path) -> list[tuple[str, str, str | None]]:
    """(statements, rendered output, expected) per golden step."""
    clock = StepClock()
    conn = changefeed.connect(db, clock=clock)
    out = []
    try:
        for step in read_golden(path):
            result = None
            for stmt in parse(step.statements, "sql"):
                clock.now += STEP_NS
                result = conn.session.execute(stmt, ())
            if step.expected is not None:
                assert result is not None
                out.append((step.statements, render_sqlline(result), step.expected))
    finally:
        conn.close()
    return out


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_phoenix_golden(path: Path, tmp_path: Path) -> None:
    for statements, got, expected in run_golden(path, tmp_path / "db"):
        assert got == expected, f"after:\n{statements}\n--- got:\n{got}"
