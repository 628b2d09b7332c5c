"""Functions for worker processes: importable by name, as spawned workers
need them."""

import os
from typing import Any, Dict


def double(x: int) -> int:
    return 2 * x


def tagged_with_pid(row: Dict[str, Any]) -> Dict[str, Any]:
    return dict(row, pid=os.getpid())


def fail_on_three(x: int) -> int:
    if x == 3:
        raise KeyError(f"no item {x}")
    return x
