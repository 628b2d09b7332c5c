"""The README's Python program: it type-checks under mypy --strict and runs
as written, over a directory of JSONL files."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_program() -> str:
    section = README.read_text().split("## From Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's From Python section has a python block"
    return match.group(1)


@pytest.mark.timeout(300)
def test_the_readme_program_type_checks_and_runs(tmp_path: Path) -> None:
    program = tmp_path / "readme_program.py"
    program.write_text(readme_program() + "print(batch.shape, batch.dtype, sorted(state))\n")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(program)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / "data").mkdir()
    for f in range(3):
        with open(tmp_path / "data" / f"part{f}.jsonl", "w") as out:
            for i in range(300):
                words = " ".join(f"w{(i * j) % 101}" for j in range(i % 40 + 1))
                out.write(json.dumps({"id": i, "text": words}) + "\n")
    env = dict(os.environ, RANK="0", WORLD_SIZE="1")
    ran = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("(8, 512) uint32 ["), ran.stdout
