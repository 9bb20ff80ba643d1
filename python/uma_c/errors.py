"""uma's errors as Python exceptions: the status name and uma_last_error()'s message."""

from . import binding

_MEMORY_STATUSES = ("UMA_ERR_OUT_OF_MEMORY", "UMA_ERR_QUOTA_EXCEEDED")


class UmaError(RuntimeError):
    """A C ABI call failed. `status` is the uma_status value, `status_name` its name (e.g.
    "UMA_ERR_UNKNOWN_POINTER"), `function` the C function, `message` uma_last_error()."""

    def __init__(self, function, status, message):
        self.function = function
        self.status = status
        self.status_name = binding.STATUS_NAMES.get(status, f"uma_status({status})")
        self.message = message
        super().__init__(f"{function}: {self.status_name}: {message or '(no message)'}")


class UmaMemoryError(UmaError, MemoryError):
    """Out of memory or over the quota: a UmaError that `except MemoryError` also catches."""


class UmaTimeoutError(UmaError, TimeoutError):
    """UMA_ERR_TIMEOUT: a UmaError that `except TimeoutError` also catches (e.g.
    ArbiterMember.wait_budget)."""


def error_for(function, status, message):
    """The exception for a failed call (UmaMemoryError for the two memory statuses,
    UmaTimeoutError for UMA_ERR_TIMEOUT)."""
    name = binding.STATUS_NAMES.get(status, "")
    kind = UmaMemoryError if name in _MEMORY_STATUSES else \
        UmaTimeoutError if name == "UMA_ERR_TIMEOUT" else UmaError
    return kind(function, status, message)


def optional_function(lib, name, added_with):
    """The C function `name` of `lib`; a library built before `added_with` (e.g. "the host
    tier and uma_copy (issue 39)") lacks it and raises UmaError(UMA_ERR_NOT_SUPPORTED) saying
    so (the rest of the binding keeps working)."""
    function = getattr(lib, name, None)
    if function is None:
        raise UmaError(name, binding.STATUS["UMA_ERR_NOT_SUPPORTED"],
                       f"this libuma_c.so has no {name}: it predates {added_with}; use a newer "
                       "uma")
    return function


def check_status(lib, function, status):
    """Raises the exception for `status` of the C call `function` (nothing for UMA_OK), with
    the message of uma_last_error() on this thread."""
    if status != 0:
        message = lib.uma_last_error()
        raise error_for(function, status, message.decode(errors="replace") if message else "")
