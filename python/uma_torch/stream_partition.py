"""Which parameters of a model stay resident and which layers stream, for a device budget
(uma_torch.offload without an optimizer; docs/frameworks.md "Inference beyond the device
budget"). Pure arithmetic over the model's parameters: nothing is moved or planned here.
"""

import collections

from .offload import PAGE, OffloadError, ranges_of, walk_blocks

ALIGN = 256  # a parameter's offset in a layer's host and staging buffers


def align(nbytes, to):
    """`nbytes` rounded up to a multiple of `to`."""
    return -(-nbytes // to) * to


def nbytes_of(param):
    return param.numel() * param.element_size()


def charged_bytes(ranges):
    """The bytes uma charges a plan of `ranges` [(address, bytes)]: every page they touch,
    each page once."""
    spans = sorted((ptr // PAGE, -(-(ptr + nbytes) // PAGE)) for ptr, nbytes in ranges)
    pages, end = 0, 0
    for first, last in spans:
        first = max(first, end)
        if last > first:
            pages += last - first
        end = max(end, last)
    return pages * PAGE


def planned_bytes(tensors):
    """What a plan of `tensors` is charged (charged_bytes of their ranges): the budget that
    holds them all resident."""
    return charged_bytes(ranges_of(tensors))


def layout(params):
    """([offset of each parameter], bytes): the parameters one after another in a layer's host
    and staging buffers, each at a multiple of ALIGN."""
    offsets, end = [], 0
    for param in params:
        offsets.append(end)
        end = align(end + nbytes_of(param), ALIGN)
    return offsets, end


def _own_storage(param, owners):
    """Whether `param` is the whole of a storage no other parameter shares: only then does
    replacing its data free its memory, and copying its bytes copy its values."""
    if not param.is_contiguous() or param.numel() == 0:
        return False
    storage = param.untyped_storage()
    return storage.data_ptr() == param.data_ptr() and storage.nbytes() == nbytes_of(param) \
        and owners[param.data_ptr()] == 1


class Partition:
    """The outcome: `resident` (parameters planned and held on the device), `streamed`
    [(name, module, params)] (the layers that stream, in forward order), `resident_layers`
    (how many layers stay resident), `resident_bytes` (what their plan is charged),
    `buffer_bytes` (one staging buffer: the largest streamed layer's layout, whole pages),
    `buffers` (staging buffers: 2, fewer where fewer layers stream) and `streamed_bytes` (the
    streamed layers' layouts: the bytes one forward pass copies)."""

    def __init__(self, resident, streamed, resident_layers, resident_bytes, sizes):
        self.resident, self.streamed = resident, streamed
        self.resident_layers, self.resident_bytes = resident_layers, resident_bytes
        self.buffers = min(2, len(streamed))
        self.buffer_bytes = align(max(sizes), PAGE) if sizes else 0
        self.streamed_bytes = sum(sizes)

    @property
    def needed_bytes(self):
        """The budget it needs: the resident plan and the staging buffers."""
        return self.resident_bytes + self.buffers * self.buffer_bytes


def split(torch, model):
    """(fixed, layers): the parameters that stay resident whatever the budget — those of
    blocks that are not layers (embeddings, final norms, heads: walk_blocks), those shared by
    several blocks (tied weights), and those that do not own their storage whole (strided,
    views, shared storage) — and the layers [(name, module, own params)] in forward order,
    without those."""
    blocks = walk_blocks(torch, model)
    uses = collections.Counter(id(p) for _, _, params, _ in blocks for p in params)
    owners = collections.Counter(p.data_ptr() for p in {id(p): p for _, _, params, _ in blocks
                                                          for p in params}.values())
    fixed, layers = {}, []
    for name, module, params, layer in blocks:
        own = []
        for param in params:
            if not layer or uses[id(param)] > 1 or not _own_storage(param, owners):
                fixed[id(param)] = param
            else:
                own.append(param)
        if own:
            layers.append((name, module, own))
    return list(fixed.values()), layers


def partition(torch, model, budget):
    """The Partition keeping the most layers resident (the first ones in forward order) with
    the resident plan and two staging buffers for the largest streamed layer within `budget`
    bytes. None fits: OffloadError naming the least budget that would."""
    fixed, layers = split(torch, model)
    sizes = [layout(params)[1] for _, _, params in layers]
    least = None
    for kept in range(len(layers), -1, -1):
        resident = fixed + [p for _, _, params in layers[:kept] for p in params]
        option = Partition(resident, layers[kept:], kept, planned_bytes(resident), sizes[kept:])
        if option.needed_bytes <= budget:
            return option
        least = option.needed_bytes if least is None else min(least, option.needed_bytes)
    floor = Partition(fixed, layers, 0, planned_bytes(fixed), sizes)
    where = (f"{floor.resident_bytes} for the parameters that always stay resident "
             "(embeddings, norms, heads, tied weights) and "
             f"{floor.buffers} staging buffer(s) of {floor.buffer_bytes} for the largest layer"
             if layers else "no layer (a child of a ModuleList or Sequential) can stream")
    raise OffloadError(f"uma_torch.offload: a budget of {budget} bytes cannot run this model: "
                       f"it needs at least {least} bytes ({where}); raise budget_bytes")
