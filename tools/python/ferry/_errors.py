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


class Error(Exception):
    """A ferry error: ``code`` is the status code's name, ``message`` the
    message (also ``str(error)``)."""

    code = "UNKNOWN"

    def __init__(self, message="", code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __repr__(self):
        return f"{type(self).__name__}({self.code}: {self.message!r})"


def _subclass(name, code, *bases):
    cls = type(name, (Error,) + bases, {"code": code, "__module__": "ferry"})
    cls.__doc__ = f"Status {code}."
    return cls


CancelledError = _subclass("CancelledError", "CANCELLED")
UnknownError = _subclass("UnknownError", "UNKNOWN")
InvalidArgumentError = _subclass(
    "InvalidArgumentError", "INVALID_ARGUMENT", ValueError)
DeadlineExceededError = _subclass(
    "DeadlineExceededError", "DEADLINE_EXCEEDED", TimeoutError)
NotFoundError = _subclass("NotFoundError", "NOT_FOUND", LookupError)
AlreadyExistsError = _subclass("AlreadyExistsError", "ALREADY_EXISTS")
PermissionDeniedError = _subclass(
    "PermissionDeniedError", "PERMISSION_DENIED", PermissionError)
ResourceExhaustedError = _subclass(
    "ResourceExhaustedError", "RESOURCE_EXHAUSTED")
FailedPreconditionError = _subclass(
    "FailedPreconditionError", "FAILED_PRECONDITION")
AbortedError = _subclass("AbortedError", "ABORTED")
OutOfRangeError = _subclass("OutOfRangeError", "OUT_OF_RANGE")
UnimplementedError = _subclass(
    "UnimplementedError", "UNIMPLEMENTED", NotImplementedError)
InternalError = _subclass("InternalError", "INTERNAL")
UnavailableError = _subclass(
    "UnavailableError", "UNAVAILABLE", ConnectionError)
DataLossError = _subclass("DataLossError", "DATA_LOSS")
UnauthenticatedError = _subclass(
    "UnauthenticatedError", "UNAUTHENTICATED", PermissionError)

BY_CODE = {cls.code: cls for cls in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
    NotFoundError, AlreadyExistsError, PermissionDeniedError,
    ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError)}

__all__ = ["Error"] + [cls.__name__ for cls in BY_CODE.values()]
