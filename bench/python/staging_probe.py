"""Which device staging memory the copy engines fill at the link's speed, and what each copy
does to a kernel beside it (issue 39): pinned host -> cudaMalloc memory, pinned host -> managed
memory prefetched to the device, and the reverse direction. No uma: raw CUDA through CuPy and
PyTorch, so that the answer does not depend on uma's code. Prints every round and the median."""
import statistics
import sys
import time

import cupy
import torch

MB = 1 << 20
SIZE = 512 * MB
ROUNDS = 5


def gbps(nbytes, ms):
    return nbytes / ms / 1e6


def main():
    rt = cupy.cuda.runtime
    dev = torch.cuda.current_device()
    pinned = torch.empty(SIZE, dtype=torch.uint8, pin_memory=True)
    pinned.random_(0, 255)
    device_buf = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    managed = cupy.cuda.malloc_managed(SIZE)
    mptr = managed.ptr
    copy_stream = torch.cuda.Stream()
    cs = copy_stream.cuda_stream
    # Managed pages made resident on the device by writing them from a GPU kernel (first touch
    # faults them there); read back where they are through the CUDA 13 attribute if CuPy has it.
    arr = cupy.ndarray((SIZE,), cupy.uint8, managed)
    arr.fill(1)
    cupy.cuda.Device().synchronize()
    torch.cuda.synchronize()

    def timed_copy(dst, src, n, stream):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        rt.memcpyAsync(dst, src, n, 4, stream.cuda_stream)
        e.record(stream)
        e.synchronize()
        return s.elapsed_time(e)

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def gemm_ms(n=20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            a @ b
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / n

    variants = {
        "h2d pinned->device": (device_buf.data_ptr(), pinned.data_ptr()),
        "h2d pinned->managed(resident)": (mptr, pinned.data_ptr()),
        "d2h device->pinned": (pinned.data_ptr(), device_buf.data_ptr()),
        "d2h managed(resident)->pinned": (pinned.data_ptr(), mptr),
    }
    rows = {k: [] for k in variants}
    slow = {k: [] for k in variants}
    base = []
    for r in range(ROUNDS):
        base.append(gemm_ms())
        for name, (dst, src) in variants.items():
            rows[name].append(gbps(SIZE, timed_copy(dst, src, SIZE, copy_stream)))
            # a gemm loop on the default stream while copies run back to back on the side
            ev = torch.cuda.Event()
            for _ in range(12):
                rt.memcpyAsync(dst, src, SIZE, 4, cs)
            g = gemm_ms()
            torch.cuda.synchronize()
            slow[name].append(g / base[-1])
    print(f"gemm alone ms per round: {[round(x, 3) for x in base]}")
    for name in variants:
        print(f"{name:34s} GB/s rounds {[round(x, 1) for x in rows[name]]} median "
              f"{statistics.median(rows[name]):.1f}; gemm slowdown beside it rounds "
              f"{[round(x, 2) for x in slow[name]]} median {statistics.median(slow[name]):.2f}")
    # both directions at once (full duplex?)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    other = torch.cuda.Stream()
    pinned2 = torch.empty(SIZE, dtype=torch.uint8, pin_memory=True)
    dev2 = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(4):
        rt.memcpyAsync(device_buf.data_ptr(), pinned.data_ptr(), SIZE, 4, cs)
        rt.memcpyAsync(pinned2.data_ptr(), dev2.data_ptr(), SIZE, 4, other.cuda_stream)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"duplex: {4 * SIZE / dt / 1e9:.1f} GB/s each way, {8 * SIZE / dt / 1e9:.1f} total")
    print(torch.cuda.get_device_name(), "cupy", cupy.__version__, "torch", torch.__version__)


if __name__ == "__main__":
    sys.exit(main())
