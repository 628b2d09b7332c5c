"""``Stateful``: anything with ``state_dict()`` and ``load_state_dict()``."""

from typing import Any, Dict, Protocol, runtime_checkable


@runtime_checkable
class Stateful(Protocol):
    """An object that saves and loads its own position (an iterable or sampler
    with it restores directly instead of being fast-forwarded)."""

    def state_dict(self) -> Dict[str, Any]: ...

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None: ...
