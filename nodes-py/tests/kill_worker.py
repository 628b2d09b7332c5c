"""A training loop that the SIGKILL test kills and restarts: each step
appends its item to ``out.txt`` and then saves ``{state, lines}``
atomically, so that a restart truncates the output to the saved step and
resumes from that step's state.

Usage: python kill_worker.py DATA_DIR WORK_DIR
"""

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import nodes_rs as nr
import nodes_rs.torchdata as tn


class Numbered(tn.BaseNode[Dict[str, Any]]):
    """A Python node: numbers the records it passes on (its own state)."""

    def __init__(self, source: tn.BaseNode[Dict[str, Any]]) -> None:
        super().__init__()
        self.source = source
        self.count = 0

    def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
        super().reset(initial_state)
        self.source.reset(initial_state["source"] if initial_state else None)
        self.count = initial_state["count"] if initial_state else 0

    def next(self) -> Dict[str, Any]:
        record: Dict[str, Any] = next(self.source)
        self.count += 1
        return dict(record, n=self.count)

    def get_state(self) -> Dict[str, Any]:
        return {"source": self.source.state_dict(), "count": self.count}


def label(record: Dict[str, Any]) -> str:
    """The Python callable under ParallelMapper."""
    return f"{record['id']}/{record['n']}"


def build(data: Path) -> "nr.Loader[Any]":
    def part(prefix: str, seed: int) -> nr.Pipeline:
        files = sorted(str(p) for p in data.glob(f"{prefix}*.jsonl"))
        records = Numbered(nr.Files.list(files).read_jsonl())
        labelled = tn.ParallelMapper(records, label, num_workers=2)
        return nr.source(labelled).shuffle(16, seed)

    mix = nr.weighted({"a": part("a", 1), "b": part("b", 2)}, {"a": 0.7, "b": 0.3}, seed=3)
    # One epoch: a kill between the last item's checkpoint and "done" leaves a
    # state at the epoch's end, which resumes to that end, not to a new epoch.
    return nr.Loader(mix.prefetch(4), restart_on_stop_iteration=False)


def main(data: Path, work: Path) -> None:
    out, checkpoint = work / "out.txt", work / "checkpoint.json"
    loader = build(data)
    lines: List[str] = []
    if checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        lines = out.read_text().splitlines()[: saved["lines"]]
        out.write_text("".join(line + "\n" for line in lines))
        loader.load_state_dict(saved["state"])
    with open(out, "a") as sink:
        for item in loader:
            sink.write(item + "\n")
            sink.flush()
            lines.append(item)
            tmp = work / "checkpoint.tmp"
            tmp.write_text(json.dumps({"state": loader.state_dict(), "lines": len(lines)}))
            os.replace(tmp, checkpoint)
            print(len(lines), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
