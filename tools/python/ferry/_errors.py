"""ferry's errors as Python exceptions.

Every error ferry reports carries a status code (gRPC's names). It is raised
as ``ferry.Error`` -- with ``.code``, the code's name, and the same message
as in C++ -- through the subclass for its code, which is also the built-in
exception a Python program expects::

    DEADLINE_EXCEEDED   DeadlineExceededError(Error, TimeoutError)
    INVALID_ARGUMENT    InvalidArgumentError(Error, ValueError)
    UNAVAILABLE         UnavailableError(Error, ConnectionError)
    NOT_FOUND           NotFoundError(Error, LookupError)
    PERMISSION_DENIED   PermissionDeniedError(Error, PermissionError)
    UNAUTHENTICATED     UnauthenticatedError(Error, PermissionError)
    UNIMPLEMENTED       UnimplementedError(Error, NotImplementedError)
    others              AlreadyExistsError, FailedPreconditionError, ... (Error)

The other way round, an exception raised by a registered Python function
reaches its caller as a status: a ``ferry.Error`` keeps its code; the
built-ins above map back to their codes (``TypeError`` too is
INVALID_ARGUMENT); anything else is INTERNAL. The message is
``"<ExceptionClass>: <message>"``.
"""

from __future__ import annotations


class Error(Exception):
    """A ferry error: ``code`` is the status code's name, ``message`` the
    message (also ``str(error)``)."""

    code: str = "UNKNOWN"
    message: str

    def __init__(self, message: str = "", code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}: {self.message!r})"


def _subclass(name: str, code: str, *bases: type) -> type[Error]:
    cls = type(name, (Error,) + bases, {"code": code, "__module__": "ferry"})
    cls.__doc__ = f"Status {code}."
    return cls


CancelledError: type[Error] = _subclass("CancelledError", "CANCELLED")
UnknownError: type[Error] = _subclass("UnknownError", "UNKNOWN")
InvalidArgumentError: type[Error] = _subclass(
    "InvalidArgumentError", "INVALID_ARGUMENT", ValueError)
DeadlineExceededError: type[Error] = _subclass(
    "DeadlineExceededError", "DEADLINE_EXCEEDED", TimeoutError)
NotFoundError: type[Error] = _subclass(
    "NotFoundError", "NOT_FOUND", LookupError)
AlreadyExistsError: type[Error] = _subclass(
    "AlreadyExistsError", "ALREADY_EXISTS")
PermissionDeniedError: type[Error] = _subclass(
    "PermissionDeniedError", "PERMISSION_DENIED", PermissionError)
ResourceExhaustedError: type[Error] = _subclass(
    "ResourceExhaustedError", "RESOURCE_EXHAUSTED")
FailedPreconditionError: type[Error] = _subclass(
    "FailedPreconditionError", "FAILED_PRECONDITION")
AbortedError: type[Error] = _subclass("AbortedError", "ABORTED")
OutOfRangeError: type[Error] = _subclass("OutOfRangeError", "OUT_OF_RANGE")
UnimplementedError: type[Error] = _subclass(
    "UnimplementedError", "UNIMPLEMENTED", NotImplementedError)
InternalError: type[Error] = _subclass("InternalError", "INTERNAL")
UnavailableError: type[Error] = _subclass(
    "UnavailableError", "UNAVAILABLE", ConnectionError)
DataLossError: type[Error] = _subclass("DataLossError", "DATA_LOSS")
UnauthenticatedError: type[Error] = _subclass(
    "UnauthenticatedError", "UNAUTHENTICATED", PermissionError)

BY_CODE: dict[str, type[Error]] = {cls.code: cls for cls in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
    NotFoundError, AlreadyExistsError, PermissionDeniedError,
    ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError)}

# Written out (the names of Error and BY_CODE's classes, in that order) so
# type checkers see what `from ._errors import *` brings.
__all__ = [
    "Error", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "ResourceExhaustedError",
    "FailedPreconditionError", "AbortedError", "OutOfRangeError",
    "UnimplementedError", "InternalError", "UnavailableError",
    "DataLossError", "UnauthenticatedError",
]
