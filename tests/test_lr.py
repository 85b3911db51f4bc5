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
