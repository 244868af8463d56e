"""Every CQL example of the ScyllaDB CDC document, run verbatim, prints what the document shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import changefeed
from changefeed.cli.render import render_cql
from tests.golden_files import expected_output_of, read_golden, script_of

GOLDEN = sorted((Path(__file__).parent / "golden" / "scylla").glob("*.cql"))


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_python_api(path: Path, tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db", dialect="cql")
    try:
        for step in read_golden(path):
            result = conn.execute(step.statements)
            if step.expected is not None:
                assert render_cql(result) == step.expected, f"after:\n{step.statements}"
    finally:
        conn.close()


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_cli(path: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "changefeed.cli.main", "sql", "--cql", "--db", str(tmp_path / "db")],
        input=script_of(path),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip("\n") == expected_output_of(path)
