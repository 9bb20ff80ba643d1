"""offload() of a model whose state lives in a uma_torch.pool (no global install): the pool's
allocator makes the plans, and the state the training loop makes later lands in the pool too:
the gradients (made by the autograd engine's threads, which a pool does not serve) are kept in
pool memory and zeroed in place instead of dropped, and the optimizer's step runs in the pool
(its state is made there on the first step)."""

import types


def offload_allocator(pool, model):
    """(uma_c.Allocator, Pool or None) the offload plans with: the pool's given or found (the
    one holding the model's first parameter) when uma is not PyTorch's allocator, else the
    installed one. Raises OffloadError when neither holds the model."""
    from . import allocator as installed_allocator, is_installed
    from .offload import OffloadError
    from .pool import Pool, pool_of
    if pool is not None:
        if not isinstance(pool, Pool):
            raise TypeError(f"uma_torch.offload: pool must be a uma_torch.Pool, not "
                            f"{type(pool).__name__}")
        return pool.allocator, pool
    if is_installed():
        return installed_allocator(), None
    first = next(iter(model.parameters()), None)
    found = pool_of(first) if first is not None and first.is_cuda else None
    if found is None:
        raise OffloadError("uma_torch.offload: the model's parameters are not in uma's memory: "
                           "build the model under a uma_torch.pool() (with pool: model = ...) "
                           "or call uma_torch.install() before anything touches CUDA")
    return found.allocator, found


class PoolState:
    """The model's gradients kept in the pool and the optimizer's step run in it, for one
    offload; undo() gives the model and optimizer their own zero_grad back."""

    def __init__(self, torch, pool, model, optimizer):
        self.torch, self.pool, self.model, self.optimizer = torch, pool, model, optimizer
        self.pooled = set()  # data_ptr of every gradient made in the pool
        self.handles, self.replaced = [], []

    @classmethod
    def enter(cls, torch, pool, model, optimizer):
        state = cls(torch, pool, model, optimizer)
        if optimizer is not None:
            state._grads_in_pool()
        return state

    def _params(self):
        return [p for p in {id(p): p for p in self.model.parameters()}.values()
                if p.requires_grad]

    def _grads_in_pool(self):
        with self.pool.use():
            for param in self._params():
                self._pool_grad(param, zero=param.grad is None)
        for param in self._params():
            if hasattr(param, "register_post_accumulate_grad_hook"):
                self.handles.append(param.register_post_accumulate_grad_hook(self._grad_made))
        for owner in (self.model, self.optimizer):
            self._keep_grads_on_zero(owner)

    def _pool_grad(self, param, zero):
        source = param.grad
        grad = self.torch.zeros_like(param) if zero else self.torch.empty_like(source)
        if not zero:
            grad.copy_(source)
        param.grad = grad
        self.pooled.add(grad.data_ptr())

    def _grad_made(self, param):
        """A gradient the engine made outside the pool (the first after a zero_grad that set
        it to None elsewhere) moves into the pool; runs before offload's own gradient hook."""
        if param.grad is not None and param.grad.data_ptr() not in self.pooled:
            with self.pool.use():  # this (the engine's) thread
                self._pool_grad(param, zero=False)

    def _keep_grads_on_zero(self, owner):
        original = owner.zero_grad

        def zero_grad(set_to_none=True):
            return original(set_to_none=False)
        owner.zero_grad = zero_grad
        self.replaced.append(owner)

    def wrap_step(self, handle):
        """The offload handle's step runs with this thread's allocations in the pool."""
        step = handle._step

        def pooled_step(closure=None, **kwargs):
            with self.pool.use():
                return step(closure, **kwargs)
        handle._step = types.MethodType(lambda _self, *a, **k: pooled_step(*a, **k), handle)

    def undo(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []
        for owner in self.replaced:
            vars(owner).pop("zero_grad", None)
        self.replaced = []
