"""Joining a serving node's arbiter from PyTorch (docs/frameworks.md "Joining the node's
arbiter"): under uma_torch.install() the budget the node grants on a device becomes uma's
residency budget there, and what it leaves after uma's planned bytes the spill limit of the
install's hooks, so a lowered budget moves
PyTorch's most recently allocated blocks to the host at once (contents kept) and a raised one
brings them back, oldest first."""


def join_arbiter(target, name, *, device=0, min_bytes=0, wanted_bytes, priority=0, weight=1):
    """Joins the arbiter of the node at `target` ("unix:PATH", its socket) as `name` with the
    global install's allocator, claiming `device` (uma_c.Allocator.join_arbiter's claim), and
    returns the uma_c.ArbiterMember once the first budget is applied. Keep it: leaving (leave(),
    the end of a `with` block, or collecting it) frees the node's bytes and leaves uma's budget
    where the last grant put it. Raises InstallError before uma_torch.install(), TypeError or
    ValueError for a bad argument (before anything is sent), UmaError for the node's refusal."""
    from . import allocator
    return allocator().join_arbiter(target, name, device=device, min_bytes=min_bytes,
                                    wanted_bytes=wanted_bytes, priority=priority, weight=weight)
