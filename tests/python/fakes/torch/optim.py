"""torch.optim stand-in: an Optimizer with param_groups and per-parameter state; AdamW makes
two moments per parameter on its first step. Each step logs the parameters it updated (by
address) to torch.cuda.log."""

from . import cuda, zeros_like


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.param_groups = [dict(defaults, params=list(params))]
        self.state = {}

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        updated = []
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                self._update(param, self.state.setdefault(param, {}))
                updated.append(param.data_ptr())
        cuda.log.append(("optimizer.step", updated))
        return loss

    def _update(self, param, state):
        pass

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for param in group["params"]:
                param.grad = None


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3):
        super().__init__(params, {"lr": lr})

    def _update(self, param, state):
        if not state:
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)
