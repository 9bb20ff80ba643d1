"""Inference beyond the device budget (issue 39): what uma_torch.offload(model, budget_bytes=B)
does without an optimizer where the library has the host tier. The first layers that fit stay
resident (planned once, held); every other layer's parameters live in uma's host tier (pinned)
and stream, one copy a layer on a side stream, into two device staging buffers that the layers
take turns in. docs/frameworks.md "Inference beyond the device budget" says why each piece is
as it is.
"""

import uma_c

from .offload import OffloadError, _active, _active_lock, prefetch_all, ranges_of
from .stream_partition import layout, nbytes_of, partition


class StreamingError(RuntimeError):
    """A streamed model was used in a way streaming does not support: a forward pass that
    autograd records (a backward pass through streamed layers would read staging buffers that
    later layers have overwritten)."""


class _DeviceBytes:
    """`nbytes` of device memory at `ptr` as a __cuda_array_interface__ of bytes, for
    torch.as_tensor (bf16 has no typestr: a buffer is bytes, a parameter a view of its slice)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "strides": None, "version": 3}


class _Layer:
    """One streamed layer: its parameters (names, shapes, offsets in its buffers), its host
    tier buffer (0 while its parameters are on the device), the placeholders its parameters
    hold between forward passes, its views into its staging buffer, and the event its last
    copy ends with."""

    __slots__ = ("name", "module", "params", "names", "shapes", "sizes", "offsets", "nbytes",
                 "host", "placeholders", "views", "done")

    def __init__(self, name, module, params, names):
        self.name, self.module, self.params = name, module, params
        self.names = [names.get(id(p), "?") for p in params]
        self.shapes = [tuple(p.shape) for p in params]
        self.sizes = [nbytes_of(p) for p in params]
        self.offsets, self.nbytes = layout(params)
        self.host, self.placeholders, self.views, self.done = 0, [], [], None


class StreamedInference:
    """What offload() returns for inference: the resident plan held, the streamed layers'
    hooks in force. `streamed` names the layers that stream, `resident` holds the parameters
    planned resident; `stats`: streamed_blocks, resident_layers, resident_bytes,
    streamed_bytes (copied a forward pass), staging_bytes, copies (layer copies issued),
    forwards. undo() (or leaving the with block) puts every parameter back on the device."""

    @classmethod
    def start(cls, torch, allocator, model, tensors, settings):
        """Partitions the model, checks the resident parameters are uma's, sets the budget,
        plans the resident ones, moves the streamed ones to the host tier and installs the
        hooks. Raises OffloadError (nothing changed) or UmaError (everything undone)."""
        part = partition(torch, model, settings["budget"])
        resident = {id(p) for p in part.resident}
        prefetch_all(torch, allocator, [(what, t) for what, t in tensors if id(t) in resident],
                     settings["device"], settings["device"])
        handle = cls(torch, allocator, model, settings, part)
        try:
            allocator.set_device_budget(handle.device, settings["budget"])
            handle._begin()
        except BaseException:
            handle.undo()
            raise
        return handle

    def __init__(self, torch, allocator, model, settings, part):
        self.torch, self.allocator, self.model = torch, allocator, model
        self.device, self.restore_budget = settings["device"], settings["restore_budget"]
        self.budget = settings["budget"]
        names = {id(p): name for name, p in model.named_parameters()}
        self.resident = part.resident
        self.resident_ranges = ranges_of(part.resident)
        self.layers = [_Layer(name, module, params, names)
                       for name, module, params in part.streamed]
        self.streamed = [layer.name for layer in self.layers]
        self.buffer_bytes, self.buffer_count = part.buffer_bytes, part.buffers
        self.staging, self.staging_tensors = [], []  # addresses, torch views of them
        self.loaded = [None] * self.buffer_count  # the layer whose bytes each buffer holds
        self.freed = [None] * self.buffer_count  # event: the last layer using it is done
        self.copy_stream, self.handles, self.timing = None, [], []
        self.planned, self.active = False, True
        self.stats = {"streamed_blocks": len(self.layers),
                      "resident_layers": part.resident_layers,
                      "resident_bytes": part.resident_bytes,
                      "streamed_bytes": part.streamed_bytes,
                      "staging_bytes": part.buffers * part.buffer_bytes,
                      "copies": 0, "forwards": 0}

    # --- setting up -----------------------------------------------------------------------

    def _compute(self):
        return self.torch.cuda.current_stream(self.device)

    def _begin(self):
        compute = self._compute()
        if self.resident_ranges:
            self.allocator.will_access(self.resident_ranges, device=self.device, mode="read",
                                       policy="migrate", stream=compute)
            self.planned = True
        if not self.layers:
            return
        self.copy_stream = self.torch.cuda.Stream(self.device)
        where = self.torch.device("cuda", self.device)
        for _ in range(self.buffer_count):
            ptr = self.allocator.device_alloc(self.buffer_bytes, self.device)
            self.staging.append(ptr)
            self.staging_tensors.append(self.torch.as_tensor(
                _DeviceBytes(ptr, self.buffer_bytes), device=where))
        for k, layer in enumerate(self.layers):
            self._move_out(layer, compute)
            buffer = self.staging_tensors[k % self.buffer_count]
            layer.views = [buffer[offset:offset + size].view(p.dtype).view(shape)
                           for p, offset, size, shape in zip(layer.params, layer.offsets,
                                                             layer.sizes, layer.shapes)]
        self._install_hooks()

    def _move_out(self, layer, compute):
        """The layer's parameters copied into a host tier buffer of their layout, then their
        device memory let go (each holds an empty placeholder of its dtype)."""
        layer.host = self.allocator.host_alloc(layer.nbytes)
        try:
            for param, name, offset, size in zip(layer.params, layer.names, layer.offsets,
                                                 layer.sizes):
                self._copy(layer.host + offset, param.data_ptr(), size, compute, name)
            compute.synchronize()
        except BaseException:
            host, layer.host = layer.host, 0
            self.allocator.tier_free(host)
            raise
        layer.placeholders = [self.torch.empty(0, dtype=p.dtype, device=p.device)
                              for p in layer.params]
        for param, placeholder in zip(layer.params, layer.placeholders):
            param.data = placeholder
        self.allocator.trim()  # the layer's device memory back to the backend

    def _copy(self, dst, src, nbytes, stream, name):
        try:
            self.allocator.copy(dst, src, nbytes, stream)
        except uma_c.UmaError as error:
            if error.status_name != "UMA_ERR_UNKNOWN_POINTER":
                raise
            raise OffloadError(
                f"uma_torch.offload: parameter {name!r} is not in memory uma handed out: it was "
                "allocated under another allocator. Call uma_torch.install() first, before "
                "anything touches CUDA, then build the model") from error

    def _install_hooks(self):
        self.handles.append(self.model.register_forward_pre_hook(
            lambda module, args: self._forward_started()))
        for k, layer in enumerate(self.layers):
            self.handles.append(layer.module.register_forward_pre_hook(
                lambda module, args, k=k: self._enter(k)))
            self.handles.append(layer.module.register_forward_hook(
                lambda module, args, out, k=k: self._leave(k)))

    # --- the hooks ------------------------------------------------------------------------

    def _forward_started(self):
        """The model's forward pass begins: the first layers' copies are issued unless the
        last pass sent them ahead already."""
        self.stats["forwards"] += 1
        self.timing = []
        for k in range(self.buffer_count):
            self._issue(k)

    def _issue(self, k):
        """Layer k's bytes copied into its buffer on the copy stream, after the last layer
        using that buffer is done (nothing if they are there or on their way)."""
        b = k % self.buffer_count
        if self.loaded[b] == k:
            return
        layer, stream = self.layers[k], self.copy_stream
        if self.freed[b] is not None:
            stream.wait_event(self.freed[b])
        self.loaded[b] = None  # overwritten from here on, whatever the copy's fate
        self.allocator.copy(self.staging[b], layer.host, layer.nbytes, stream)
        layer.done = self.torch.cuda.Event(enable_timing=True)
        layer.done.record(stream)
        self.loaded[b] = k
        self.stats["copies"] += 1

    def _enter(self, k):
        layer = self.layers[k]
        if self.torch.is_grad_enabled() and any(p.requires_grad for p in layer.params):
            raise StreamingError(
                f"uma_torch: layer {layer.name!r} streams through a staging buffer, so no "
                "backward pass can run through it: run the model under torch.no_grad() or "
                "torch.inference_mode() (or requires_grad_(False)), or pass an optimizer to "
                "offload() to train")
        self._issue(k)
        compute = self._compute()
        ready = self.torch.cuda.Event(enable_timing=True)
        ready.record(compute)
        compute.wait_event(layer.done)
        self.timing.append((ready, layer.done))
        for param, view in zip(layer.params, layer.views):
            param.data = view

    def _leave(self, k):
        layer, b = self.layers[k], k % self.buffer_count
        if self.freed[b] is None:
            self.freed[b] = self.torch.cuda.Event()
        self.freed[b].record(self._compute())
        for param, placeholder in zip(layer.params, layer.placeholders):
            param.data = placeholder
        # The next layer to use this buffer: later in this pass, else (weights never change)
        # the first of the next pass, sent ahead now.
        following = k + self.buffer_count
        self._issue(following if following < len(self.layers) else b)

    # --- what it measured -----------------------------------------------------------------

    def exposed_transfer_ms(self):
        """The copy time the last forward pass waited for (ms): over its streamed layers, how
        long after the compute stream reached a layer its copy ended (0 where it ended
        before). Waits for those copies."""
        total = 0.0
        for ready, done in self.timing:
            done.synchronize()
            ready.synchronize()
            total += max(0.0, ready.elapsed_time(done))
        return total

    # --- undo -----------------------------------------------------------------------------

    def undo(self):
        """Removes the hooks, puts every streamed parameter back into device memory of its own
        (its bytes as they were), frees the host tier and staging buffers, ends the resident
        plan and restores the device's budget. A second call does nothing. Should putting a
        layer back fail (no memory), that error is raised with the layers not yet put back
        still on the host tier: undo() again finishes the job."""
        if not self.active:
            return
        for handle in self.handles:
            handle.remove()
        self.handles, self.timing = [], []
        compute = self._compute()
        if self.copy_stream is not None:
            compute.wait_stream(self.copy_stream)
        for layer in self.layers:
            if layer.host:
                self._move_in(layer, compute)
        self.loaded = [None] * self.buffer_count
        self.staging_tensors = []
        for layer in self.layers:
            layer.views = []
        while self.staging:
            self.allocator.tier_free(self.staging.pop())
        try:
            if self.planned:
                self.planned = False
                self.allocator.done_with(self.resident_ranges)
            self.allocator.set_device_budget(self.device, self.restore_budget)
        finally:
            self.active = False
            with _active_lock:
                if _active.get(id(self.model)) is self:
                    del _active[id(self.model)]

    def _move_in(self, layer, compute):
        fresh = [self.torch.empty(shape, dtype=p.dtype, device=p.device)
                 for p, shape in zip(layer.params, layer.shapes)]
        for tensor, offset, size in zip(fresh, layer.offsets, layer.sizes):
            self.allocator.copy(tensor.data_ptr(), layer.host + offset, size, compute)
        compute.synchronize()
        for param, tensor in zip(layer.params, fresh):
            param.data = tensor
        host, layer.host = layer.host, 0
        layer.placeholders = []
        self.allocator.tier_free(host)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
