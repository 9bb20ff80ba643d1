"""PyTorch's memory tools on uma's memory (docs/frameworks.md "PyTorch's memory tools").

Under uma_torch.install() PyTorch's own memory_stats(), memory_snapshot() and memory history see
nothing (pytorch#133281): these functions answer in their place, with PyTorch's keys and
formats, from what uma's hooks counted. Without the global install (PyTorch's allocator, uma
pools beside it: uma_torch.pool) PyTorch's own tools see every pool's segments, and these
functions are PyTorch's."""

import collections
import threading
import time
import traceback

import uma_c
from uma_c import torch_tools

_history_lock = threading.Lock()
_history = {"enabled": False, "stacks": False, "max_entries": 0, "traces": {}, "frames": {},
            "callback": None}


def _installed_lib():
    from . import _state
    return _state["lib"] if _state else None


def _device_index(device):
    import torch
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    return torch.device(device).index or 0


def memory_stats(device=None):
    """torch.cuda.memory_stats()' dict for `device`: under uma_torch.install() what uma's hooks
    counted, in PyTorch's keys (the ones whose meaning carries over: allocation, allocated_bytes,
    requested_bytes, active, active_bytes per all/small_pool/large_pool; reserved_bytes.all;
    num_ooms, num_alloc_retries, num_device_alloc, num_device_free); else PyTorch's own."""
    lib = _installed_lib()
    if lib is None:
        import torch
        return torch.cuda.memory_stats(device)
    stats = torch_tools.memory_stats(lib, _device_index(device))
    return collections.OrderedDict(sorted(stats.items()))


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def spilled_bytes():
    """Under uma_torch.install(): the bytes of the blocks handed to PyTorch while it held more
    than its memory fraction on the device, placed on the host and mapped for the device
    instead of refused (docs/frameworks.md "Spill instead of OOM"); 0 without the install."""
    lib = _installed_lib()
    return torch_tools.spilled_bytes(lib) if lib is not None else 0


def reset_peak_memory_stats(device=None):
    """Every peak becomes its current value (torch.cuda.reset_peak_memory_stats)."""
    lib = _installed_lib()
    if lib is None:
        import torch
        return torch.cuda.reset_peak_memory_stats(device)
    torch_tools.reset_peak_memory_stats(lib, _device_index(device))


def reset_accumulated_memory_stats(device=None):
    """The allocated/freed totals and num_ooms start again from 0."""
    lib = _installed_lib()
    if lib is None:
        import torch
        return torch.cuda.reset_accumulated_memory_stats(device)
    torch_tools.reset_accumulated_memory_stats(lib, _device_index(device))


# --- memory history and snapshots -------------------------------------------------------------

def _frames():
    """The Python stack of the allocating call, innermost first (PyTorch's order), without
    uma_torch's own frames."""
    stack = traceback.extract_stack()[:-3]
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(stack)]


def _observe(action, address, size, device, stream):
    with _history_lock:
        if not _history["enabled"]:
            return
        frames = _frames() if _history["stacks"] else []
        traces = _history["traces"].setdefault(device, collections.deque(
            maxlen=_history["max_entries"]))
        now = int(time.time() * 1e6)
        rounded = max(512, (size + 511) // 512 * 512)
        if action == "alloc":
            _history["frames"][address] = frames
            traces.append({"action": "alloc", "addr": address, "size": rounded, "stream": stream,
                           "time_us": now, "frames": frames})
        elif action == "free":
            _history["frames"].pop(address, None)
            for kind in ("free_requested", "free_completed"):
                traces.append({"action": kind, "addr": address, "size": rounded,
                               "stream": stream, "time_us": now, "frames": frames})
        else:
            traces.append({"action": "oom", "addr": 0, "size": size, "stream": stream,
                           "time_us": now, "frames": frames, "device_free": 0})


def record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000):
    """torch.cuda.memory._record_memory_history on uma's memory: `enabled` None stops it;
    "state" or "all" record; `stacks` "python" or "all" record the allocating Python stack of
    each block (C++ frames are PyTorch's own and not seen from uma's hooks). Without the global
    install it is PyTorch's own."""
    lib = _installed_lib()
    if lib is None:
        import torch
        return torch.cuda.memory._record_memory_history(enabled, context=context, stacks=stacks,
                                                        max_entries=max_entries)
    if enabled not in (None, "state", "all"):
        raise ValueError(f"uma_torch.record_memory_history: enabled={enabled!r} is not None, "
                         "'state' or 'all'")
    if stacks not in ("python", "all"):
        raise ValueError(f"uma_torch.record_memory_history: stacks={stacks!r} is not 'python' "
                         "or 'all'")
    with _history_lock:
        _history.update(enabled=enabled is not None, stacks=context is not None,
                        max_entries=max_entries)
        if enabled is None:
            _history["traces"], _history["frames"] = {}, {}
    callback = torch_tools.set_observer(lib, _observe if enabled is not None else None)
    _history["callback"] = callback  # the C callback must outlive its registration


def _segment(block, device, frames):
    size, requested = max(512, (block["size"] + 511) // 512 * 512), block["size"]
    return {"device": device, "address": block["address"], "total_size": size,
            "allocated_size": size, "active_size": size, "requested_size": requested,
            "stream": block["stream"], "segment_type": "small" if size <= (1 << 20) else "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
            "blocks": [{"address": block["address"], "size": size, "requested_size": requested,
                        "state": "active_allocated", "frames": frames}]}


def memory_snapshot():
    """torch.cuda.memory._snapshot()'s dict ("segments", "device_traces") that
    torch.cuda._memory_viz renders: under the global install each block PyTorch holds is a
    segment of its own (uma's block allocator carves its slabs itself), with the recorded
    frames; the traces of record_memory_history. Without the install it is PyTorch's own."""
    lib = _installed_lib()
    import torch
    if lib is None:
        return torch.cuda.memory._snapshot()
    devices = range(max(1, torch.cuda.device_count()))
    segments = []
    with _history_lock:
        frames, traces = dict(_history["frames"]), {d: list(t) for d, t in
                                                     _history["traces"].items()}
    for device in devices:
        for block in torch_tools.live_blocks(lib, device):
            segments.append(_segment(block, device, frames.get(block["address"], [])))
    return {"segments": segments, "device_traces": [traces.get(d, []) for d in devices],
            "allocator_settings": {"allocator": "uma_torch.install"}}


def dump_snapshot(path):
    """memory_snapshot() pickled to `path` (what pytorch.org/memory_viz loads)."""
    import pickle
    with open(path, "wb") as f:
        pickle.dump(memory_snapshot(), f)
