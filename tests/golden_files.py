"""Reader for golden files: statements, each SELECT followed by its expected output.

Format: statements end with ';'; a block between a line ``>>>`` and a line ``<<<`` is the exact
output expected from the statement just before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Step:
    statements: str
    expected: str | None


def read_golden(path: Path) -> list[Step]:
    steps: list[Step] = []
    buf: list[str] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == ">>>":
            j = lines.index("<<<", i + 1)
            steps.append(Step("\n".join(buf), "\n".join(lines[i + 1 : j])))
            buf = []
            i = j + 1
            continue
        buf.append(line)
        i += 1
    if any(x.strip() for x in buf):
        steps.append(Step("\n".join(buf), None))
    return steps


def script_of(path: Path) -> str:
    return "\n".join(s.statements for s in read_golden(path))


def expected_output_of(path: Path) -> str:
    return "\n\n".join(s.expected for s in read_golden(path) if s.expected is not None)
