"""Joining a serving node's arbiter through the C ABI (docs/c_abi.md "The node's arbiter"): a
node started with `uma serve --arbiter-total DEVICE:BYTES` divides each device's bytes among the
processes that join it, and a member applies each budget to the allocator it joined with (its
device budget; for the default allocator also the spill limit of PyTorch's hooks). Allocator
inherits ArbiterCalls (join_arbiter).

    with a.join_arbiter("unix:/run/uma/uma.sock", "infer", wanted_bytes=8 << 30) as member:
        member.wait_budget(at_least=1 << 30)
        member.want(2 << 30)
"""

import ctypes
import json
import weakref

from . import binding
from .errors import check_status as _check, optional_function

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
# The keys of a claim and their defaults (uma_arbiter_claim_init's); wanted_bytes has none.
CLAIM_FIELDS = ("device", "min_bytes", "wanted_bytes", "priority", "weight", "idle")
CLAIM_DEFAULTS = {"device": 0, "min_bytes": 0, "priority": 0, "weight": 1, "idle": False}
_LIMITS = {"device": 2**31 - 1, "min_bytes": UINT64_MAX,
           "wanted_bytes": UINT64_MAX, "priority": UINT32_MAX, "weight": UINT32_MAX}


def arbiter_function(lib, name):
    """The C function `name` of ARBITER_PROTOTYPES (errors.optional_function)."""
    return optional_function(lib, name, "joining the node's arbiter")


def _int_in(what, value, limit):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"uma: {what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= limit:
        raise ValueError(f"uma: {what}={value} is out of range 0..{limit}")
    return value


def _text(what, value):
    if not isinstance(value, str):
        raise TypeError(f"uma: {what} must be a str, not {type(value).__name__}")
    if not value or "\0" in value:
        raise ValueError(f"uma: {what} must be a non-empty str without NUL, not {value!r}")
    return value.encode()


def check_claim(where, claim):
    """The claim dict `claim` with its defaults, checked: TypeError for a key it does not know, a
    missing wanted_bytes or a value of the wrong type, ValueError for one out of its C type's
    range. `where` ("claims[2]", or "" for keywords) prefixes the names in the messages."""
    at = f"{where}." if where else ""
    if not isinstance(claim, dict):
        raise TypeError(f"uma: {where} must be a dict, not {type(claim).__name__}")
    unknown = sorted(set(claim) - set(CLAIM_FIELDS))
    if unknown:
        raise TypeError(f"uma: {where or 'the claim'} has unknown key(s) {', '.join(unknown)}; "
                        f"known: {', '.join(CLAIM_FIELDS)}")
    if "wanted_bytes" not in claim:
        raise TypeError(f"uma: {at}wanted_bytes is missing (what the process would use)")
    checked = dict(CLAIM_DEFAULTS, **claim)
    for key, limit in _LIMITS.items():
        _int_in(f"{at}{key}", checked[key], limit)
    if not isinstance(checked["idle"], bool):
        raise TypeError(f"uma: {at}idle must be True or False, not {checked['idle']!r}")
    return checked


def make_claims(lib, claims, keywords=False):
    """(ctypes array of uma_arbiter_claim, count) from a list of claim dicts (check_claim),
    each device claimed once; raises before the library is called. `keywords`: the one claim
    came as keywords (the messages name them alone)."""
    if isinstance(claims, dict) or not isinstance(claims, (list, tuple)):
        raise TypeError(f"uma: claims must be a list of dicts, not {type(claims).__name__}")
    if not claims:
        raise ValueError("uma: claims is empty; a member claims at least one device")
    checked = [check_claim("" if keywords else f"claims[{i}]", c) for i, c in enumerate(claims)]
    devices = [c["device"] for c in checked]
    for i, device in enumerate(devices):
        if device in devices[:i]:
            raise ValueError(f"uma: claims[{i}] claims device {device} again (claims["
                             f"{devices.index(device)}] did)")
    init = arbiter_function(lib, "uma_arbiter_claim_init")  # the first C call
    array = (binding.ArbiterClaim * len(checked))()
    for slot, claim in zip(array, checked):
        init(ctypes.byref(slot))
        for key in CLAIM_FIELDS:
            setattr(slot, key, int(claim[key]))
    return array, len(checked)


class ArbiterMember:
    """A membership of a node's arbiter (`uma_arbiter*`), made by Allocator.join_arbiter. It
    lasts until leave() (also at the end of a `with` block, when the Allocator is closed, or when
    this object is collected). Every method raises UmaError on a failing status; after leave(),
    ValueError."""

    def __init__(self, lib, handle, allocator, devices):
        self._lib = lib
        self._handle = handle
        self._allocator = allocator  # kept alive: the member applies budgets to it
        self.devices = tuple(devices)

    def _live(self):
        if self._handle is None:
            raise ValueError("uma: this ArbiterMember has left")
        return self._handle

    def _device(self, device):
        _int_in("device", device, _LIMITS["device"])
        return device

    def budget(self, device=0):
        """The budget last applied on `device` (a device claimed at the join), in bytes."""
        out = ctypes.c_uint64(0)
        status = self._lib.uma_arbiter_budget(self._live(), self._device(device),
                                              ctypes.byref(out))
        _check(self._lib, "uma_arbiter_budget", status)
        return out.value

    def wait_budget(self, at_least=0, at_most=UINT64_MAX, timeout_s=10, device=0):
        """Waits up to `timeout_s` seconds until the budget applied on `device` is within
        [at_least, at_most] and returns it. Raises UmaTimeoutError (a UmaError and a
        TimeoutError: UMA_ERR_TIMEOUT) when it was not in time, UmaError
        (UMA_ERR_ALLOCATOR_STOPPED) when the membership ended first."""
        _int_in("at_least", at_least, UINT64_MAX)
        _int_in("at_most", at_most, UINT64_MAX)
        if at_least > at_most:
            raise ValueError(f"uma: at_least={at_least} is above at_most={at_most}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
            raise TypeError(f"uma: timeout_s must be a number, not {type(timeout_s).__name__}")
        if not 0 <= timeout_s <= UINT32_MAX / 1000:
            raise ValueError(f"uma: timeout_s={timeout_s} is out of range 0..{UINT32_MAX // 1000}")
        out = ctypes.c_uint64(0)
        status = self._lib.uma_arbiter_wait_budget(self._live(), self._device(device), at_least,
                                                   at_most, int(timeout_s * 1000),
                                                   ctypes.byref(out))
        _check(self._lib, "uma_arbiter_wait_budget", status)
        return out.value

    def want(self, wanted_bytes, device=0, idle=False):
        """This process wants `wanted_bytes` on `device` now, or is idle there (it lends what it
        holds above its minimum). The budgets that follow arrive as they come (wait_budget)."""
        _int_in("wanted_bytes", wanted_bytes, UINT64_MAX)
        if not isinstance(idle, bool):
            raise TypeError(f"uma: idle must be True or False, not {idle!r}")
        status = self._lib.uma_arbiter_want(self._live(), self._device(device), wanted_bytes,
                                            int(idle))
        _check(self._lib, "uma_arbiter_want", status)

    def report(self):
        """The arbiter's report as this process may see it, as a dict: member, revoked, ended,
        devices (each with its members), decisions, members, revocations."""
        needed = ctypes.c_size_t(0)
        buffer = None
        status = self._lib.uma_arbiter_report_json(self._live(), None, 0, ctypes.byref(needed))
        while status == binding.STATUS["UMA_ERR_BUFFER_TOO_SMALL"]:
            buffer = ctypes.create_string_buffer(needed.value)
            status = self._lib.uma_arbiter_report_json(self._live(), buffer, len(buffer),
                                                       ctypes.byref(needed))
        _check(self._lib, "uma_arbiter_report_json", status)
        return json.loads(buffer.value.decode())

    @property
    def left(self):
        return self._handle is None

    def leave(self):
        """Leaves the arbiter: the node frees this member's budgets at once. Again: nothing."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.uma_arbiter_leave(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.leave()

    def __del__(self):
        try:
            self.leave()
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone
            pass


class ArbiterCalls:
    """Allocator's join_arbiter (a mixin: it uses the Allocator's _lib and _live)."""

    def join_arbiter(self, target, name, claims=None, **claim):
        """Joins the arbiter of the node at `target` ("unix:PATH", the node's socket) as `name`
        and returns an ArbiterMember once the first budgets are applied. `claims` is a list of
        dicts {device, min_bytes, wanted_bytes, priority, weight, idle} (wanted_bytes required;
        the others default to 0, 0, 0, 1, False), or give one device's claim as keywords
        instead (join_arbiter(target, name, wanted_bytes=8 << 30)). Bad arguments raise
        TypeError/ValueError before the library is called; the node's refusals raise UmaError
        (UMA_ERR_INVALID_ARGUMENT, UMA_ERR_QUOTA_EXCEEDED, UMA_ERR_BACKEND for a node that
        cannot be reached, UMA_ERR_NOT_SUPPORTED for one without an arbiter). Closing this Allocator leaves its members first."""
        if claims is not None and claim:
            raise TypeError("uma: give claims or one claim's keywords, not both")
        target_bytes, name_bytes = _text("target", target), _text("name", name)
        array, count = make_claims(self._lib, [claim] if claims is None else claims,
                                   keywords=claims is None)
        handle = ctypes.c_void_p()
        join = arbiter_function(self._lib, "uma_arbiter_join")
        status = join(self._live(), target_bytes, name_bytes, array, count, ctypes.byref(handle))
        _check(self._lib, "uma_arbiter_join", status)
        member = ArbiterMember(self._lib, handle.value, self, [c.device for c in array])
        self._arbiter_members().add(member)
        return member

    def _arbiter_members(self):
        members = self.__dict__.get("_members")
        if members is None:
            members = self.__dict__.setdefault("_members", weakref.WeakSet())
        return members

    def _leave_arbiters(self):
        """Leaves every member joined through this Allocator (before it is destroyed)."""
        for member in list(self._arbiter_members()):
            member.leave()
