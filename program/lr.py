"""Learning-rate schedules (PaddlePaddle's `paddle.optimizer.lr`).

The learning rate of an optimizer is a persistable variable of the program, so a schedule
changes it between steps without rebuilding anything: the executor writes the
scheduler's current value into that variable before every run of the program, and the
user advances the schedule with `scheduler.step()` (per step or per epoch, as they like).

    sched = pg.lr.CosineDecay(1e-3, T_max=1000)
    pg.optimizer.Adam(learning_rate=sched).minimize(loss)
    for step in ...:
        exe.run(main, feed=..., fetch_list=[loss])
        sched.step()

`state_dict()` / `set_state_dict()` hold plain numbers, saved with checkpoints.
"""
from __future__ import annotations

import bisect
import math

__all__ = ["LRScheduler", "StepDecay", "MultiStepDecay", "ExponentialDecay", "NaturalExpDecay",
           "InverseTimeDecay", "CosineAnnealingDecay", "CosineDecay", "LinearWarmup", "PiecewiseDecay",
           "PolynomialDecay", "LambdaDecay", "NoamDecay", "OneCycleLR", "CyclicLR", "ReduceOnPlateau"]


class LRScheduler:
    """Base class: `get_lr()` computes the rate for `last_epoch`; `step()` advances it.

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(10, 10)
        >>> scheduler = paddle.optimizer.lr.StepDecay(learning_rate=0.5, step_size=2, gamma=0.1)
        >>> sgd = paddle.optimizer.SGD(learning_rate=scheduler, parameters=linear.parameters())
        >>> for epoch in range(3):
        ...     for batch_id in range(2):
        ...         loss = paddle.mean(linear(paddle.uniform([10, 10])))
        ...         loss.backward()
        ...         sgd.step()
        ...         sgd.clear_grad()
        ...     scheduler.step()                  # once an epoch (or once a batch, if the schedule counts steps)
        >>> round(sgd.get_lr(), 6), scheduler.last_epoch
        (0.05, 3)
        >>> scheduler.state_dict()["last_epoch"]
        3
    """

    def __init__(self, learning_rate: float = 0.1, last_epoch: int = -1, verbose: bool = False):
        self.base_lr = float(learning_rate)
        self.last_lr = self.base_lr
        self.last_epoch = last_epoch
        self.verbose = verbose
        self.step()

    def __call__(self) -> float:
        return self.last_lr

    def step(self, epoch: int | None = None) -> None:
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        self.last_lr = float(self.get_lr())
        if self.verbose:
            print(f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to {self.last_lr}.")

    def get_lr(self) -> float:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch, "last_lr": self.last_lr}

    def set_state_dict(self, state: dict) -> None:
        self.last_epoch = int(state["last_epoch"])
        self.last_lr = float(state["last_lr"])

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.last_lr})"


class StepDecay(LRScheduler):
    """lr = learning_rate * gamma ** (epoch // step_size).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.StepDecay(learning_rate=0.5, step_size=2, gamma=0.1)
        >>> rates = []
        >>> for epoch in range(5):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.5, 0.05, 0.05, 0.005]
    """

    def __init__(self, learning_rate, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        if int(step_size) <= 0:
            raise ValueError(f"StepDecay: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class MultiStepDecay(LRScheduler):
    """lr = learning_rate * gamma ** (number of milestones <= epoch).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.MultiStepDecay(learning_rate=0.5, milestones=[2, 4], gamma=0.1)
        >>> rates = []
        >>> for epoch in range(6):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.5, 0.05, 0.05, 0.005, 0.005]
    """

    def __init__(self, learning_rate, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        if list(milestones) != sorted(milestones):
            raise ValueError(f"MultiStepDecay: milestones must increase, got {list(milestones)}")
        self.milestones, self.gamma = list(milestones), float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch)


class ExponentialDecay(LRScheduler):
    """lr = learning_rate * gamma ** epoch.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.ExponentialDecay(learning_rate=0.5, gamma=0.9)
        >>> rates = []
        >>> for epoch in range(4):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.45, 0.405, 0.3645]
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.gamma ** self.last_epoch


class NaturalExpDecay(LRScheduler):
    """lr = learning_rate * exp(-gamma * epoch).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.NaturalExpDecay(learning_rate=0.5, gamma=0.1)
        >>> rates = []
        >>> for epoch in range(4):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.452419, 0.409365, 0.370409]
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * math.exp(-self.gamma * self.last_epoch)


class InverseTimeDecay(LRScheduler):
    """lr = learning_rate / (1 + gamma * epoch).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.InverseTimeDecay(learning_rate=0.5, gamma=0.1)
        >>> rates = []
        >>> for epoch in range(4):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.454545, 0.416667, 0.384615]
    """

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = float(gamma)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr / (1 + self.gamma * self.last_epoch)


class CosineAnnealingDecay(LRScheduler):
    """lr = eta_min + (learning_rate - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.5, T_max=4)
        >>> rates = []
        >>> for epoch in range(5):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.426777, 0.25, 0.073223, 0.0]
    """

    def __init__(self, learning_rate, T_max, eta_min=0.0, last_epoch=-1, verbose=False):
        if int(T_max) <= 0:
            raise ValueError(f"CosineAnnealingDecay: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2


CosineDecay = CosineAnnealingDecay


class PolynomialDecay(LRScheduler):
    """lr = (learning_rate - end_lr) * (1 - epoch / decay_steps) ** power + end_lr; with
    `cycle`, decay_steps grows to the next multiple past the epoch.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.PolynomialDecay(learning_rate=0.5, decay_steps=4, end_lr=0.1)
        >>> rates = []
        >>> for epoch in range(6):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.4, 0.3, 0.2, 0.1, 0.1]
    """

    def __init__(self, learning_rate, decay_steps, end_lr=0.0001, power=1.0, cycle=False,
                 last_epoch=-1, verbose=False):
        if int(decay_steps) <= 0:
            raise ValueError(f"PolynomialDecay: decay_steps must be positive, got {decay_steps}")
        self.decay_steps, self.end_lr = int(decay_steps), float(end_lr)
        self.power, self.cycle = float(power), bool(cycle)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        epoch, steps = self.last_epoch, self.decay_steps
        if self.cycle:
            steps = steps * max(1, math.ceil(epoch / steps))
        else:
            epoch = min(epoch, steps)
        return (self.base_lr - self.end_lr) * (1 - epoch / steps) ** self.power + self.end_lr


class PiecewiseDecay(LRScheduler):
    """lr = values[i] for the first boundary i that the epoch has not reached.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.PiecewiseDecay(boundaries=[2, 4], values=[0.1, 0.05, 0.01])
        >>> rates = []
        >>> for epoch in range(5):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.1, 0.1, 0.05, 0.05, 0.01]
    """

    def __init__(self, boundaries, values, last_epoch=-1, verbose=False):
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"PiecewiseDecay: needs len(boundaries) + 1 values, got {len(boundaries)} "
                             f"boundaries and {len(values)} values")
        self.boundaries, self.values = list(boundaries), [float(v) for v in values]
        super().__init__(self.values[0], last_epoch, verbose)

    def get_lr(self):
        return self.values[bisect.bisect_right(self.boundaries, self.last_epoch)]


class LambdaDecay(LRScheduler):
    """lr = learning_rate * lr_lambda(epoch).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.LambdaDecay(learning_rate=0.5, lr_lambda=lambda epoch: 0.95 ** epoch)
        >>> rates = []
        >>> for epoch in range(3):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.5, 0.475, 0.45125]
    """

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        if not callable(lr_lambda):
            raise TypeError("LambdaDecay: lr_lambda must be callable")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        return self.base_lr * self.lr_lambda(self.last_epoch)


class NoamDecay(LRScheduler):
    """lr = learning_rate * d_model ** -0.5 * min(epoch ** -0.5, epoch * warmup_steps ** -1.5)
    (0 at epoch 0, as PaddlePaddle's).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.NoamDecay(d_model=64, warmup_steps=4)
        >>> rates = []
        >>> for epoch in range(7):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates            # up for 4 epochs, then down as epoch ** -0.5
        [0.0, 0.015625, 0.03125, 0.046875, 0.0625, 0.055902, 0.051031]
    """

    def __init__(self, d_model, warmup_steps, learning_rate=1.0, last_epoch=-1, verbose=False):
        self.d_model, self.warmup_steps = float(d_model), float(warmup_steps)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self):
        # PaddlePaddle's rule: epoch 0 takes 1 for epoch ** -0.5 (undefined there), so the
        # warm-up term, 0, wins and the first rate is 0
        decay = 1.0 if self.last_epoch == 0 else self.last_epoch ** -0.5
        return self.base_lr * self.d_model ** -0.5 * min(decay, self.last_epoch * self.warmup_steps ** -1.5)


class LinearWarmup(LRScheduler):
    """Ramp linearly from start_lr to end_lr over `warmup_steps`, then follow
    `learning_rate` (a number, or another scheduler that starts counting then).

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.LinearWarmup(learning_rate=0.5, warmup_steps=4, start_lr=0.0, end_lr=0.5)
        >>> rates = []
        >>> for epoch in range(6):
        ...     rates.append(round(scheduler(), 6))     # the rate of this epoch
        ...     scheduler.step()
        >>> rates
        [0.0, 0.125, 0.25, 0.375, 0.5, 0.5]
        >>> after = paddle.optimizer.lr.StepDecay(learning_rate=0.5, step_size=2, gamma=0.1)
        >>> scheduler = paddle.optimizer.lr.LinearWarmup(after, warmup_steps=2, start_lr=0.1, end_lr=0.5)
        >>> rates = []
        >>> for epoch in range(6):
        ...     rates.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> rates                                     # warm-up, then StepDecay counting from 0
        [0.1, 0.3, 0.5, 0.5, 0.05, 0.05]
    """

    def __init__(self, learning_rate, warmup_steps, start_lr, end_lr, last_epoch=-1, verbose=False):
        if int(warmup_steps) <= 0:
            raise ValueError(f"LinearWarmup: warmup_steps must be positive, got {warmup_steps}")
        self.after = learning_rate if isinstance(learning_rate, LRScheduler) else None
        self.warmup_steps, self.start_lr, self.end_lr = int(warmup_steps), float(start_lr), float(end_lr)
        super().__init__(learning_rate.base_lr if self.after else learning_rate, last_epoch, verbose)

    def get_lr(self):
        if self.last_epoch < self.warmup_steps:
            return self.start_lr + (self.end_lr - self.start_lr) * self.last_epoch / self.warmup_steps
        if self.after is not None:
            self.after.step(self.last_epoch - self.warmup_steps)
            return self.after()
        return self.base_lr

    def state_dict(self):
        state = super().state_dict()
        if self.after is not None:
            state["after"] = self.after.state_dict()
        return state

    def set_state_dict(self, state):
        super().set_state_dict(state)
        if self.after is not None and "after" in state:
            self.after.set_state_dict(state["after"])


class OneCycleLR(LRScheduler):
    """The one-cycle policy: from max_learning_rate / divide_factor up to max_learning_rate
    over the first phase_pct of total_steps, then down to end_learning_rate (three_phase:
    back to the initial rate, then down to end_learning_rate), by cosine or linear
    annealing, as PaddlePaddle's OneCycleLR. Step it once a batch.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.OneCycleLR(max_learning_rate=1.0, total_steps=6, phase_pct=0.5)
        >>> rates = []
        >>> for step in range(6):
        ...     rates.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> rates            # up from 1/25 to 1 by step 2, then down to 1e-4 by step 5
        [0.04, 0.52, 1.0, 0.750025, 0.250075, 0.0001]
    """

    def __init__(self, max_learning_rate, total_steps, divide_factor=25.0, end_learning_rate=0.0001,
                 phase_pct=0.3, anneal_strategy="cos", three_phase=False, last_epoch=-1, verbose=False):
        if int(total_steps) <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if not 0.0 <= float(phase_pct) <= 1.0:
            raise ValueError(f"OneCycleLR: phase_pct must be in [0, 1], got {phase_pct}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps = int(total_steps)
        self.max_lr = float(max_learning_rate)
        initial, end, n = self.max_lr / float(divide_factor), float(end_learning_rate), self.total_steps
        if three_phase:
            self._ends = [phase_pct * n - 1.0, 2 * phase_pct * n - 2.0, n - 1.0]
            self._rates = [initial, self.max_lr, initial, end]
        else:
            self._ends = [phase_pct * n - 1.0, n - 1.0]
            self._rates = [initial, self.max_lr, end]
        self._anneal = self._cos if anneal_strategy == "cos" else self._linear
        super().__init__(initial, last_epoch, verbose)

    @staticmethod
    def _cos(start, end, pct):
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _linear(start, end, pct):
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: step {step} is past total_steps {self.total_steps}")
        begin = 0.0
        for i, end in enumerate(self._ends):
            if step <= end or i == len(self._ends) - 1:   # the last phase takes what is left
                return self._anneal(self._rates[i], self._rates[i + 1], (step - begin) / (end - begin))
            begin = end


class CyclicLR(LRScheduler):
    """Rates cycling between base_learning_rate and max_learning_rate: step_size_up steps up,
    step_size_down (default the same) down, the amplitude scaled per cycle ("triangular":
    constant, "triangular2": halved each cycle) or per step ("exp_range": exp_gamma ** step),
    or by `scale_fn` of the cycle or step (scale_mode), as PaddlePaddle's CyclicLR. Step it
    once a batch.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.CyclicLR(0.1, 0.5, step_size_up=2, mode="triangular2")
        >>> rates = []
        >>> for step in range(9):
        ...     rates.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> rates            # the second cycle's peak is half as high
        [0.1, 0.3, 0.5, 0.3, 0.1, 0.2, 0.3, 0.2, 0.1]
    """

    def __init__(self, base_learning_rate, max_learning_rate, step_size_up, step_size_down=None,
                 mode="triangular", exp_gamma=1.0, scale_fn=None, scale_mode="cycle", last_epoch=-1, verbose=False):
        if int(step_size_up) <= 0 or (step_size_down is not None and int(step_size_down) <= 0):
            raise ValueError(f"CyclicLR: step sizes must be positive, got {step_size_up}, {step_size_down}")
        if scale_fn is None and mode not in ("triangular", "triangular2", "exp_range"):
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range', got {mode!r}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.cycle_size, self.step_up_pct = up + down, up / (up + down)
        self.max_lr, self.gamma = float(max_learning_rate), float(exp_gamma)
        self.amplitude = self.max_lr - float(base_learning_rate)
        if scale_fn is not None:
            self.scale_fn, self.scale_mode = scale_fn, scale_mode
        else:
            self.scale_fn, self.scale_mode = {
                "triangular": (lambda x: 1.0, "cycle"),
                "triangular2": (lambda x: 1 / (2.0 ** (x - 1)), "cycle"),
                "exp_range": (lambda x: self.gamma ** x, "iterations")}[mode]
        super().__init__(base_learning_rate, last_epoch, verbose)

    def get_lr(self):
        iterations = self.last_epoch
        cycle = 1 + iterations // self.cycle_size
        pct = 1.0 + iterations / self.cycle_size - cycle
        scale = pct / self.step_up_pct if pct <= self.step_up_pct else (1 - pct) / (1 - self.step_up_pct)
        return self.base_lr + self.amplitude * scale * self.scale_fn(cycle if self.scale_mode == "cycle" else iterations)


class ReduceOnPlateau(LRScheduler):
    """Multiply the rate by `factor` when a metric has stopped improving for more than
    `patience` epochs (mode "min": lower is better, "max": higher; improvement by more than
    `threshold`, relative or absolute), then wait `cooldown` epochs, never below `min_lr`, as
    PaddlePaddle's ReduceOnPlateau. `step(metrics)` takes the epoch's metric.

    Examples:
        >>> import keel as paddle
        >>> scheduler = paddle.optimizer.lr.ReduceOnPlateau(learning_rate=1.0, factor=0.5, patience=1)
        >>> rates = []
        >>> for loss in [3.0, 2.0, 2.0, 2.0, 2.0, 1.0]:
        ...     scheduler.step(loss)
        ...     rates.append(scheduler())
        >>> rates            # halved after a second epoch without improvement, twice
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    """

    def __init__(self, learning_rate, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, epsilon=1e-8, verbose=False):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceOnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceOnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        if float(factor) >= 1.0:
            raise ValueError(f"ReduceOnPlateau: factor must be below 1.0, got {factor}")
        self.mode, self.factor, self.patience = mode, float(factor), int(patience)
        self.threshold, self.threshold_mode = float(threshold), threshold_mode
        self.cooldown, self.min_lr, self.epsilon = int(cooldown), float(min_lr), float(epsilon)
        self.cooldown_counter, self.best, self.num_bad_epochs = 0, None, 0
        # (no step at construction: the first step takes the first metric)
        self.base_lr = self.last_lr = float(learning_rate)
        self.last_epoch, self.verbose = 0, verbose

    def _is_better(self, current, best) -> bool:
        margin = best * self.threshold if self.threshold_mode == "rel" else self.threshold
        return current < best - margin if self.mode == "min" else current > best + margin

    def step(self, metrics, epoch=None) -> None:
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            return
        if self.best is None or self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.num_bad_epochs > self.patience:
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
            new_lr = max(self.last_lr * self.factor, self.min_lr)
            if self.last_lr - new_lr > self.epsilon:
                self.last_lr = new_lr
                if self.verbose:
                    print(f"Epoch {self.last_epoch}: ReduceOnPlateau set learning rate to {self.last_lr}.")

    def get_lr(self):
        return self.last_lr

    def state_dict(self) -> dict:
        return {**super().state_dict(), "best": self.best, "num_bad_epochs": self.num_bad_epochs,
                "cooldown_counter": self.cooldown_counter}

    def set_state_dict(self, state: dict) -> None:
        super().set_state_dict(state)
        self.best, self.num_bad_epochs = state["best"], int(state["num_bad_epochs"])
        self.cooldown_counter = int(state["cooldown_counter"])
