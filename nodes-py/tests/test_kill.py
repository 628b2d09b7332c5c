"""Exactly once from Python: a training loop SIGKILLed at random points and
resumed from its last saved state yields exactly the uninterrupted stream."""

import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

WORKER = Path(__file__).with_name("kill_worker.py")


def write_data(data: Path) -> None:
    data.mkdir()
    for prefix, files in (("a", 3), ("b", 2)):
        for f in range(files):
            with open(data / f"{prefix}{f}.jsonl", "w") as out:
                for i in range(120):
                    out.write(json.dumps({"id": f"{prefix}{f}-{i}", "text": "x" * (i % 9)}) + "\n")


def run(data: Path, work: Path, kill_after: int = 0) -> bool:
    """Runs the worker; kills it with SIGKILL after it reports ``kill_after``
    steps (0: let it finish). Whether it finished."""
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(data), str(work)], stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    steps = 0
    for line in worker.stdout:
        if line.strip() == "done":
            worker.wait()
            return True
        steps += 1
        if kill_after and steps >= kill_after:
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            return False
    assert worker.wait() == 0, "the worker failed"
    return True


@pytest.mark.timeout(900)
def test_sigkilled_training_loop_resumes_exactly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_data(data)
    reference = tmp_path / "reference"
    reference.mkdir()
    assert run(data, reference)
    expected: List[str] = (reference / "out.txt").read_text().splitlines()
    assert len(expected) == 600 and len(set(expected)) == 600
    # Its last checkpoint is the one a kill just before "done" leaves: a
    # restart from it finishes the epoch, with nothing added.
    assert run(data, reference)
    assert (reference / "out.txt").read_text().splitlines() == expected

    work = tmp_path / "killed"
    work.mkdir()
    rng = random.Random(20261206)
    kills = 0
    while not run(data, work, kill_after=rng.randint(5, 40)):
        kills += 1
        assert kills < 200, "the loop makes no progress"
    assert kills >= 20
    saved = json.loads((work / "checkpoint.json").read_text())
    got = (work / "out.txt").read_text().splitlines()[: saved["lines"]]
    assert got == expected
