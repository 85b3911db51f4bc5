"""LR schedulers against PaddlePaddle's own rules, written here as its python/paddle/optimizer/lr.py
states them (loops and the recursive cosine form, not Keel's closed forms), epoch by epoch."""
import math

import pytest

import keel.program as pg


def _noam(epoch, d_model=64, warmup=4):
    a = 1 if epoch == 0 else epoch ** -0.5        # PaddlePaddle: epoch 0 gives rate 0
    return d_model ** -0.5 * min(a, warmup ** -1.5 * epoch)


def _cosine(rates, epoch, base=0.5, eta_min=0.05, t_max=3):
    """PaddlePaddle's recursive CosineAnnealingDecay, from the previous epoch's rate."""
    if epoch == 0:
        return base
    last = rates[-1]
    if (epoch - 1 - t_max) % (2 * t_max) == 0:
        return last + (base - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
    return ((1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1) / t_max))
            * (last - eta_min) + eta_min)


def _piecewise(epoch, boundaries=(2, 5), values=(0.1, 0.05, 0.01)):
    for i, boundary in enumerate(boundaries):
        if epoch < boundary:
            return values[i]
    return values[-1]


def _recursive(rule, epochs):
    rates = []
    for epoch in range(epochs):
        rates.append(rule(rates, epoch))
    return rates


CASES = {
    "noam": (lambda: pg.lr.NoamDecay(d_model=64, warmup_steps=4), lambda rates, e: _noam(e)),
    "cosine": (lambda: pg.lr.CosineAnnealingDecay(0.5, T_max=3, eta_min=0.05), _cosine),
    "piecewise": (lambda: pg.lr.PiecewiseDecay([2, 5], [0.1, 0.05, 0.01]), lambda rates, e: _piecewise(e)),
    "polynomial_cycle": (lambda: pg.lr.PolynomialDecay(0.5, decay_steps=3, end_lr=0.1, power=2.0, cycle=True),
                         lambda rates, e: 0.4 * (1 - e / (3 * max(1, math.ceil(e / 3)))) ** 2 + 0.1),
    "multistep": (lambda: pg.lr.MultiStepDecay(0.5, [2, 5], gamma=0.5),
                  lambda rates, e: 0.5 * 0.5 ** sum(e >= m for m in (2, 5))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_scheduler_follows_paddles_rule(case):
    make, rule = CASES[case]
    scheduler = make()
    got = []
    for _ in range(10):                 # past T_max and the boundaries: the cosine turns back up
        got.append(scheduler())
        scheduler.step()
    assert got == pytest.approx(_recursive(rule, 10), rel=1e-12, abs=1e-15)


def test_noam_starts_at_zero():
    assert pg.lr.NoamDecay(d_model=512, warmup_steps=4000)() == 0.0


# Rates (or, with metrics, the rate after each step(metric)) that PaddlePaddle 3.3.1 gave for
# these schedulers, recorded from paddle.optimizer.lr with the same arguments
PADDLE_RECORDED = [
    ('OneCycleLR', {'max_learning_rate': 1.0, 'total_steps': 6, 'phase_pct': 0.5}, 6, None,
     [0.040000000000000036, 0.52, 1.0, 0.7500249999999999, 0.2500750000000001, 0.0001]),
    ('OneCycleLR', {'max_learning_rate': 0.1, 'total_steps': 20}, 20, None,
     [0.0040000000000000036, 0.013167184270002533, 0.037167184270002526, 0.06683281572999747, 0.09083281572999748, 0.1, 0.09874764921348209, 0.09505339495172584, 0.0891024825492781, 0.08119331560284375, 0.07172249276892204, 0.06116492065111791, 0.050050000000000004, 0.0389350793488821, 0.028377507231077976, 0.018906684397156263, 0.010997517450721911, 0.005046605048274169, 0.0013523507865179103, 0.0001]),
    ('OneCycleLR', {'max_learning_rate': 0.1, 'total_steps': 20, 'three_phase': True, 'anneal_strategy': 'linear', 'divide_factor': 10, 'end_learning_rate': 0.001}, 20, None,
     [0.01, 0.028000000000000004, 0.046000000000000006, 0.064, 0.082, 0.1, 0.082, 0.064, 0.046, 0.027999999999999997, 0.009999999999999995, 0.009000000000000001, 0.008, 0.007, 0.006, 0.004999999999999999, 0.004, 0.002999999999999999, 0.002, 0.0009999999999999992]),
    ('CyclicLR', {'base_learning_rate': 0.1, 'max_learning_rate': 0.5, 'step_size_up': 2, 'mode': 'triangular2'}, 9, None,
     [0.1, 0.30000000000000004, 0.5, 0.30000000000000004, 0.1, 0.2, 0.30000000000000004, 0.2, 0.1]),
    ('CyclicLR', {'base_learning_rate': 0.1, 'max_learning_rate': 0.5, 'step_size_up': 3, 'step_size_down': 2, 'mode': 'exp_range', 'exp_gamma': 0.9}, 15, None,
     [0.1, 0.21999999999999997, 0.31599999999999995, 0.39159999999999995, 0.23121999999999998, 0.1, 0.1708588000000001, 0.22754584, 0.272186884, 0.17748409780000007, 0.1, 0.14184141281200005, 0.17531454306160002, 0.20167463313316003, 0.14575358490992207]),
    ('CyclicLR', {'base_learning_rate': 0.1, 'max_learning_rate': 0.5, 'step_size_up': 3}, 15, None,
     [0.1, 0.2333333333333334, 0.3666666666666666, 0.5, 0.3666666666666668, 0.23333333333333323, 0.1, 0.2333333333333336, 0.3666666666666665, 0.5, 0.3666666666666665, 0.2333333333333336, 0.1, 0.23333333333333323, 0.3666666666666668]),
    ('ReduceOnPlateau', {'learning_rate': 1.0, 'factor': 0.5, 'patience': 1}, 6, [3.0, 2.0, 2.0, 2.0, 2.0, 1.0],
     [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]),
    ('ReduceOnPlateau', {'learning_rate': 1.0, 'factor': 0.5, 'patience': 0, 'cooldown': 2, 'mode': 'max', 'threshold_mode': 'abs', 'threshold': 0.1, 'min_lr': 0.2}, 10, [1, 1.05, 1.2, 1.1, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5],
     [1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2]),
]


@pytest.mark.parametrize("name, kwargs, steps, metrics, want", PADDLE_RECORDED,
                         ids=lambda v: v if isinstance(v, str) else None)
def test_one_cycle_cyclic_and_plateau_follow_paddlepaddle(name, kwargs, steps, metrics, want):
    scheduler = getattr(pg.lr, name)(**kwargs)
    got = []
    for i in range(steps):
        if metrics is None:
            got.append(scheduler())
            scheduler.step()
        else:
            scheduler.step(metrics[i])
            got.append(scheduler())
    assert got == pytest.approx(want, rel=1e-12)


def test_new_schedulers_refuse_bad_arguments_and_keep_their_state():
    with pytest.raises(ValueError, match="past total_steps 2"):
        s = pg.lr.OneCycleLR(0.1, total_steps=2)
        for _ in range(3):
            s.step()
    with pytest.raises(ValueError, match="mode must be"):
        pg.lr.CyclicLR(0.1, 0.5, 2, mode="sawtooth")
    with pytest.raises(ValueError, match="factor must be below 1.0"):
        pg.lr.ReduceOnPlateau(1.0, factor=2.0)
    s = pg.lr.ReduceOnPlateau(1.0, factor=0.5, patience=0)
    s.step(1.0), s.step(2.0)
    t = pg.lr.ReduceOnPlateau(1.0, factor=0.5, patience=0)
    t.set_state_dict(s.state_dict())
    assert t() == 0.5 and t.best == 1.0
    t.step(3.0)
    assert t() == 0.25
