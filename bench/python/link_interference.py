#!/usr/bin/env python3
"""How much do the backward pass's own kernels slow while the link carries traffic, and which
traffic slows them (issue 25: a step_in_backward step's compute kernels take ~40 % longer while
the mapped optimizer state crosses)?

Times two kernels of a GPT-2 backward pass on one stream, alone and while another stream keeps
one kind of traffic going, each in its own round, rounds interleaved:
  ln_grad   LayerNorm's backward (input, weight and bias gradients) on 12,288 x 1,024 fp32
  gemm      a bf16 GEMM 12,288 x 1,024 x 4,096
Traffic (256 MiB buffers, repeated until the timed kernels are done):
  none            nothing
  device_add      an in-place add on device memory (SMs and HBM busy, no link)
  pinned_copy     copy_ pinned host <-> device, both ways (copy engines over the link)
  managed_copy    copy_ managed memory preferred on the host and mapped <-> device (a
                  device-to-device cudaMemcpyAsync on managed pointers: the driver chooses how)
  managed_add     an in-place add on that mapped managed memory (a kernel across the link, as a
                  fused AdamW on mapped moments)
  pinned_add      an in-place add on pinned host memory mapped into the device (zero-copy)
  managed_adamw_1m, _4m  the same in launches of 1 Mi (4 Mi) elements each: 16 (64) thread
                  blocks a launch instead of the whole buffer's 128
  managed_prefetch  cudaMemPrefetchAsync of the managed memory to the device and back to the host
                  (the driver's migration, as uma's migrate placement and eviction do)
  device_adamw    torch's fused AdamW (multi_tensor_apply: thread blocks of 64 Ki elements) on
                  device parameters, gradients and moments
  managed_adamw   the same with the moments in the mapped managed memory: each thread block then
                  lives as long as its moments take to cross (the offload's mapped update)
Prints per kernel and traffic the median time per call and the ratio to "none".

    python3 bench/python/link_interference.py [--rounds 3] [--calls 40] [--json out.json]
"""

import argparse
import ctypes
import functools
import json
import statistics
import sys

MiB = 1 << 20
TRAFFIC = ("none", "device_add", "pinned_copy", "managed_copy", "managed_add", "pinned_add",
           "device_adamw", "managed_adamw", "managed_adamw_1m", "managed_adamw_4m",
           "managed_prefetch")


class _Wrapped:
    """A device pointer as a __cuda_array_interface__ object (for torch.as_tensor)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes // 4,), "typestr": "<f4",
                                         "data": (ptr, False), "version": 3, "strides": None}


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]  # cudaMemLocation


@functools.lru_cache(maxsize=None)
def _cudart(torch):
    """The CUDA runtime PyTorch loaded (its own copy, or the system's); searched for once."""
    import glob
    import os
    for folder in sys.path + [os.path.dirname(torch.__file__) + "/lib", "/usr/local/cuda/lib64"]:
        for path in sorted(glob.glob(os.path.join(folder, "**", "libcudart.so*"),
                                     recursive=True)):
            return ctypes.CDLL(path)
    return ctypes.CDLL("libcudart.so")


def _checked(status, what):
    if status:
        raise RuntimeError(f"{what}: CUDA runtime error {status} (a CUDA 13 runtime is needed)")


def _malloc_managed(rt, nbytes):
    """A fresh managed allocation (cudaMemAttachGlobal) of `nbytes`: its pointer."""
    ptr = ctypes.c_void_p()
    _checked(rt.cudaMallocManaged(ctypes.byref(ptr), ctypes.c_size_t(nbytes), 1),
             "cudaMallocManaged")
    return ptr


def managed_tensor(torch, shape, dtype, populate):
    """A device tensor over fresh managed memory: populated by the first kernel that writes it
    ("touch": the driver maps what each fault asks for) or prefetched whole to the device first
    ("prefetch"). Never freed: the probe's process ends with it."""
    rt = _cudart(torch)
    nbytes = torch.empty((), dtype=dtype).element_size()
    for n in shape:
        nbytes *= n
    ptr = _malloc_managed(rt, nbytes)
    if populate == "prefetch":
        _checked(rt.cudaMemPrefetchAsync(ptr, ctypes.c_size_t(nbytes), _Location(1, 0), 0, None),
                 "cudaMemPrefetchAsync")
        torch.cuda.synchronize()
    raw = torch.as_tensor(_Wrapped(ptr.value, nbytes), device="cuda")
    return raw.view(torch.uint8).view(dtype).view(shape)


def managed_on_host(torch, nbytes):
    """Managed memory preferred on the host, accessed by device 0, prefetched to the host (CUDA
    13's cudaMemLocation forms), as uma's remote_map placement leaves mapped optimizer state."""
    rt = _cudart(torch)
    host, device = _Location(2, 0), _Location(1, 0)  # cudaMemLocationTypeHost, ...Device
    ptr = _malloc_managed(rt, nbytes)
    _checked(rt.cudaMemAdvise(ptr, ctypes.c_size_t(nbytes), 3, host), "cudaMemAdvise")
    _checked(rt.cudaMemAdvise(ptr, ctypes.c_size_t(nbytes), 5, device), "cudaMemAdvise")
    tensor = torch.as_tensor(_Wrapped(ptr.value, nbytes), device="cuda")
    tensor.fill_(1.0)
    torch.cuda.synchronize()
    status = rt.cudaMemPrefetchAsync(ptr, ctypes.c_size_t(nbytes), host, 0, None)
    torch.cuda.synchronize()
    _checked(status, "cudaMemPrefetchAsync")
    return tensor, lambda: rt.cudaFree(ptr)


def pinned_mapped(torch, cupy, nbytes):
    """Pinned host memory, mapped: its host pointer is valid on the device (unified addressing)."""
    rt = cupy.cuda.runtime
    ptr = rt.hostAlloc(nbytes, 2)  # cudaHostAllocMapped
    tensor = torch.as_tensor(_Wrapped(ptr, nbytes), device="cuda")
    tensor.fill_(1.0)
    torch.cuda.synchronize()
    return tensor, lambda: rt.freeHost(ptr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--traffic-mib", type=int, default=256)
    parser.add_argument("--inputs", choices=("device", "touch", "prefetch"), default="device",
                        help="the timed kernels' tensors: cudaMalloc (PyTorch's allocator), or "
                             "managed memory populated by first touch or by a prefetch")
    parser.add_argument("--json")
    args = parser.parse_args()
    import cupy
    import torch
    torch.manual_seed(0)
    n, d = 12288, 1024
    def make(shape, dtype=torch.float32):
        if args.inputs == "device":
            return torch.randn(*shape, device="cuda", dtype=dtype)
        t = managed_tensor(torch, shape, dtype, args.inputs)
        t.copy_(torch.randn(*shape, device="cuda", dtype=dtype))
        return t

    x, dy = make((n, d)), make((n, d))
    w, b = torch.ones(d, device="cuda"), torch.zeros(d, device="cuda")
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [d], w, b, 1e-5)
    a16, b16 = make((n, d), torch.bfloat16), make((d, 4 * d), torch.bfloat16)
    kernels = {
        "ln_grad": lambda: torch.ops.aten.native_layer_norm_backward(
            dy, x, [d], mean, rstd, w, b, [True, True, True]),
        "gemm": lambda: a16 @ b16,
    }
    nbytes = args.traffic_mib * MiB
    device_buf = torch.ones(nbytes // 4, device="cuda")
    device_buf2 = torch.ones(nbytes // 4, device="cuda")
    pinned = torch.ones(nbytes // 4).pin_memory()
    frees, skipped = [], []
    try:
        managed, free = managed_on_host(torch, nbytes)
        frees.append(free)
    except Exception as error:  # an older CuPy's runtime wrappers: say so, go on without
        managed = None
        skipped.append(f"managed memory: {error!r}")
    try:
        zero_copy, free = pinned_mapped(torch, cupy, nbytes)
        frees.append(free)
    except Exception as error:
        zero_copy = None
        skipped.append(f"mapped pinned memory: {error!r}")
    traffic = {
        "none": None,
        "device_add": lambda: device_buf.add_(1.0),
        "pinned_copy": lambda: (device_buf.copy_(pinned, non_blocking=True),
                                pinned.copy_(device_buf2, non_blocking=True)),
        "managed_copy": lambda: (device_buf.copy_(managed, non_blocking=True),
                                 managed.copy_(device_buf2, non_blocking=True)),
        "managed_add": lambda: managed.add_(1.0),
        "pinned_add": lambda: zero_copy.add_(1.0),
    }
    half = nbytes // 8  # floats in each moment: the buffer holds both
    param, grad = torch.zeros(half, device="cuda"), torch.full((half,), 1e-3, device="cuda")
    steps = [torch.ones((), device="cuda")]

    def adamw(m, v):
        torch._fused_adamw_([param], [grad], [m], [v], [], steps, lr=1e-4, beta1=0.9,
                            beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False,
                            maximize=False)

    device_moments = torch.zeros(2 * half, device="cuda")
    traffic["device_adamw"] = lambda: adamw(device_moments[:half], device_moments[half:])
    traffic["managed_adamw"] = None if managed is None else \
        (lambda: adamw(managed[:half], managed[half:]))

    def sliced(size):
        def run():
            for start in range(0, half, size):
                end = min(start + size, half)
                torch._fused_adamw_([param[start:end]], [grad[start:end]],
                                    [managed[start:end]], [managed[half + start:half + end]], [],
                                    steps, lr=1e-4, beta1=0.9, beta2=0.999, weight_decay=0.01,
                                    eps=1e-8, amsgrad=False, maximize=False)
        return None if managed is None else run

    traffic["managed_adamw_1m"], traffic["managed_adamw_4m"] = sliced(1 << 20), sliced(4 << 20)
    rt = _cudart(torch)

    def prefetch_both_ways():
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        for where in (_Location(1, 0), _Location(2, 0)):
            _checked(rt.cudaMemPrefetchAsync(ctypes.c_void_p(managed.data_ptr()),
                                             ctypes.c_size_t(nbytes), where, 0, stream),
                     "cudaMemPrefetchAsync")

    traffic["managed_prefetch"] = None if managed is None else prefetch_both_ways
    if managed is None:
        traffic["managed_copy"] = traffic["managed_add"] = None
    if zero_copy is None:
        traffic["pinned_add"] = None
    for line in skipped:
        print(f"skipped: {line}")
    kinds = [t for t in TRAFFIC if t == "none" or traffic[t]]
    side = torch.cuda.Stream()
    results = {k: {t: [] for t in kinds} for k in kernels}
    spans = {k: {t: [] for t in kinds} for k in kernels}  # first call's start to last's end
    for kernel in kernels.values():  # warm up (cuBLAS handles, kernel loading)
        kernel()
    op_ms = {}  # how long one traffic operation takes alone
    for t, fn in traffic.items():
        if fn:
            with torch.cuda.stream(side):
                fn()
                start, end = torch.cuda.Event(enable_timing=True), \
                    torch.cuda.Event(enable_timing=True)
                start.record(side)
                fn()
                end.record(side)
            torch.cuda.synchronize()
            op_ms[t] = start.elapsed_time(end)
    calls_ms = {}  # all the timed calls of a kernel, back to back, alone
    for name, kernel in kernels.items():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.calls):
            kernel()
        end.record()
        torch.cuda.synchronize()
        calls_ms[name] = start.elapsed_time(end)
    for _ in range(args.rounds):
        for name, kernel in kernels.items():
            for t in kinds:
                # the traffic first, long enough to cover every timed call (slowed 4x)
                if traffic[t]:
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(int(4 * calls_ms[name] / op_ms[t]) + 2):
                            traffic[t]()
                events = [(torch.cuda.Event(enable_timing=True),
                           torch.cuda.Event(enable_timing=True)) for _ in range(args.calls)]
                for start, end in events:
                    start.record()
                    kernel()
                    end.record()
                torch.cuda.synchronize()
                results[name][t] += [s.elapsed_time(e) for s, e in events]
                spans[name][t].append(events[0][0].elapsed_time(events[-1][1]))
    device = torch.cuda.get_device_name(0)
    print(f"link interference, {device}: kernels' tensors: {args.inputs}; median ms per call "
          f"(x alone); {args.rounds} rounds of "
          f"{args.calls} calls; traffic on a second stream, {args.traffic_mib} MiB buffers")
    print("one traffic operation alone, ms: " +
          ", ".join(f"{t} {ms:.2f} ({2 * nbytes / ms / 1e6:.0f} GB/s moved)"
                    for t, ms in op_ms.items()))
    print(f"{'kernel':10s}" + "".join(f"{t:>22s}" for t in kinds))
    summary = {}
    for name in kernels:
        alone = statistics.median(results[name]["none"])
        span_alone = statistics.median(spans[name]["none"])
        cells, span_cells = [], []
        for t in kinds:
            m, span = statistics.median(results[name][t]), statistics.median(spans[name][t])
            summary[f"{name}/{t}"] = {"median_ms": m, "x_alone": m / alone, "span_ms": span,
                                      "span_x_alone": span / span_alone}
            cells.append(f"{m:.3f} ({m / alone:.2f}x)")
            span_cells.append(f"{span:.2f} ({span / span_alone:.2f}x)")
        print(f"{name:10s}" + "".join(f"{c:>22s}" for c in cells))
        print(f"{'  span':10s}" + "".join(f"{c:>22s}" for c in span_cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "args": vars(args), "results": summary,
                       "traffic_op_ms": op_ms}, f, indent=1)
    for free in frees:
        free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
