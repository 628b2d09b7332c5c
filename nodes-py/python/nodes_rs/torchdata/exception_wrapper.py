"""torchdata's wrappers that carry an exception across a thread, for programs
that import them. Exceptions from the Rust nodes reach the caller as
themselves and need no wrapper."""

import sys
import traceback
from types import TracebackType
from typing import Optional, Tuple, Type

ExcInfo = Tuple[Type[BaseException], BaseException, Optional[TracebackType]]


class ExceptionWrapper:
    """An exception caught in one thread, to raise again in another: the same
    type, with the original traceback text in its message."""

    def __init__(
        self,
        exc_info: Optional[ExcInfo] = None,
        where: str = "in background",
    ) -> None:
        if exc_info is None:
            kind, value, tb = sys.exc_info()
            if kind is None or value is None:
                raise ValueError("ExceptionWrapper needs an exception: none is being handled")
            exc_info = (kind, value, tb)
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(exc_info[0], exc_info[1], exc_info[2]))
        self.where = where

    def reraise(self) -> None:
        """Raises a new exception of the original type."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = repr(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class StartupExceptionWrapper(ExceptionWrapper):
    """An exception raised while a worker was starting."""


__all__ = ["ExceptionWrapper", "StartupExceptionWrapper"]
