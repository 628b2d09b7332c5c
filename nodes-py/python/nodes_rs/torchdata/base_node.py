"""``BaseNode``: the iterator every node is, with torchdata.nodes' contract."""

from typing import Any, Dict, Iterator, Optional, TypeVar

T = TypeVar("T", covariant=True)


class BaseNode(Iterator[T]):
    """An iterator that can be reset to the start of a pass or to a saved state.

    Subclasses write ``next`` (return an item, or raise ``StopIteration``),
    ``reset(initial_state)`` (calling ``super().reset(initial_state)``, then
    resetting their sources) and ``get_state`` (a JSON-representable dict).
    ``next(node)`` and ``state_dict()`` reset a node that was never reset.
    Python nodes can be the source or the parent of native ones.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__initialized = False

    def __iter__(self) -> "BaseNode[T]":
        return self

    def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
        """Starts a new pass (``None``) or resumes at ``initial_state``."""
        self.__initialized = True

    def get_state(self) -> Dict[str, Any]:
        """The state of the position after the last item returned."""
        raise NotImplementedError(type(self).__name__)

    def next(self) -> T:
        """The next item; raises ``StopIteration`` at the end of the pass."""
        raise NotImplementedError(type(self).__name__)

    def shutdown(self) -> None:
        """Frees background resources (threads); a reset starts them again."""

    def _ensure_reset(self) -> None:
        try:
            initialized = self.__initialized
        except AttributeError:
            raise NotImplementedError(
                f"self.__initialized not found in {type(self).__name__}: "
                "did you call super().__init__() in __init__?"
            ) from None
        if not initialized:
            self.reset(None)
            if not self.__initialized:
                raise NotImplementedError(
                    f"{type(self).__name__} was not initialized by reset(): "
                    "did you call super().reset() in your reset method?"
                )

    def __next__(self) -> T:
        self._ensure_reset()
        return self.next()

    def state_dict(self) -> Dict[str, Any]:
        """``get_state()``, resetting the node first if it was never reset."""
        self._ensure_reset()
        return self.get_state()


class NativeNode(BaseNode[T]):
    """A node whose work runs in Rust (``_native``); its source nodes were
    taken into it when it was built, so iterate the outermost node."""

    _native: Any

    def reset(self, initial_state: Optional[Dict[str, Any]] = None) -> None:
        super().reset(initial_state)
        self._native.reset(initial_state)

    def next(self) -> T:
        item: T = self._native.next()
        return item

    def get_state(self) -> Dict[str, Any]:
        state: Dict[str, Any] = self._native.get_state()
        return state

    def shutdown(self) -> None:
        self._native.shutdown()

    def describe(self) -> str:
        """The pipeline's shape: each node, its parameters and its sources."""
        text: str = self._native.describe()
        return text


def native_source(node: Any) -> Any:
    """What a native builder takes as a source: a native node's pipeline, or
    the Python node itself."""
    if not isinstance(node, BaseNode):
        raise TypeError(
            f"a source must be a BaseNode, not {type(node).__name__} "
            "(wrap an iterable in IterableWrapper)"
        )
    return node._native if isinstance(node, NativeNode) else node
