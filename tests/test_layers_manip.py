"""The builder API of program/layers/manip.py: the ops and attributes each layer appends, a
program of them run against numpy, and its round trip through an inference model."""
import numpy as np

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope


def _run(build, feed):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        fetches = build()
    assert pg.Program.parse_from_string(main.serialize_to_string()) == main
    main.verify()
    return main, fetches, Executor(CPUPlace()).run(main, feed=feed, fetch_list=fetches, scope=Scope())


def test_layers_append_paddles_ops_and_compute():
    x = np.random.default_rng(0).uniform(-1, 1, (2, 4, 3, 3)).astype(np.float32)
    m = np.random.default_rng(1).uniform(-0.9, 0.9, (4, 5)).astype(np.float32)

    def build():
        xv = pg.data("x", [-1, 4, 3, 3], "float32")
        mv = pg.data("m", [4, 5], "float32")
        idx = pg.argsort(mv, axis=1, descending=True)
        return [pg.tril(mv, 1), pg.triu(mv), idx, pg.flip(mv, [0]), pg.roll(mv, 2, axis=1),
                pg.index_select(mv, pg.assign(np.array([3, -1], np.int64)), axis=0),
                pg.take_along_axis(mv, idx, 1), pg.einsum("ij,kj->ik", mv, mv), pg.dist(mv, mv * 0.5, 3),
                pg.maxout(xv, 2), pg.l2_normalize(mv, 1), pg.shuffle_channel(xv, 2), pg.numel(xv),
                pg.unfold(xv, 2, paddings=1), pg.acos(mv), pg.asin(mv), pg.atan(mv), pg.brelu(mv, -0.5, 0.5),
                pg.stanh(mv)]

    main, fetches, got = _run(build, {"x": x, "m": m})
    types = [op.type for op in main.global_block().ops]
    for t in ["tril_triu", "argsort", "flip", "roll", "index_select", "take_along_axis", "einsum", "dist",
              "maxout", "norm", "shuffle_channel", "size", "unfold", "acos", "asin", "atan", "brelu", "stanh"]:
        assert t in types
    order = np.argsort(-m, axis=1, kind="stable")
    want = [np.tril(m, 1), np.triu(m), order, m[::-1], np.roll(m, 2, axis=1), m[[3, 3]],
            np.take_along_axis(m, order, 1), m @ m.T, np.sum(np.abs(m * 0.5) ** 3) ** (1 / 3),
            x.reshape(2, 2, 2, 3, 3).max(axis=2), m / np.sqrt((m * m).sum(1, keepdims=True) + 1e-12),
            x.reshape(2, 2, 2, 3, 3).swapaxes(1, 2).reshape(x.shape), np.int64(x.size), None,
            np.arccos(m), np.arcsin(m), np.arctan(m), np.clip(m, -0.5, 0.5),
            np.float32(1.7159) * np.tanh(np.float32(0.67) * m)]
    for i, (g, w) in enumerate(zip(got, want)):
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-7, err_msg=str(fetches[i].name))
    assert got[13].shape == (2, 16, 16)  # unfold 2x2 with padding 1 over 3x3: 4x4 positions



def test_einsum_implicit_form_has_numpys_output_labels():
    """Without '->' the output is the labels that occur once, sorted ('...' first), as in
    PaddlePaddle and numpy; the op is given the explicit equation."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    sq = np.arange(9, dtype=np.float32).reshape(3, 3)
    cases = [("ij,jk", (a, b)), ("ii", (sq,)), ("ji", (a,)), ("ba,ac", (a, b)), ("...ij,jk", (a[None], b))]

    def build():
        outs = []
        for equation, arrays in cases:
            outs.append(pg.einsum(equation, *[pg.assign(x) for x in arrays]))
        return outs

    main, _, got = _run(build, {})
    equations = [op.attr("equation") for op in main.global_block().ops if op.type == "einsum"]
    assert equations == ["ij,jk->ik", "ii->", "ji->ij", "ba,ac->bc", "...ij,jk->...ik"]
    for (equation, arrays), g in zip(cases, got):
        np.testing.assert_allclose(g, np.einsum(equation, *arrays), rtol=1e-6, err_msg=equation)


def test_put_along_axis_puts_a_number_at_every_index():
    m = np.arange(6, dtype=np.int64).reshape(2, 3)

    def build():
        idx = pg.assign(np.array([[0], [2]], np.int64))
        mv = pg.assign(m)
        return [pg.put_along_axis(mv, idx, 99, 1), pg.put_along_axis(mv, idx, 5, 1, reduce="add")]

    _, _, got = _run(build, {})
    np.testing.assert_array_equal(got[0], [[99, 1, 2], [3, 4, 99]])
    np.testing.assert_array_equal(got[1], [[5, 1, 2], [3, 4, 10]])
    assert got[0].dtype == np.int64

def test_roll_with_a_shifts_tensor_and_put_along_axis():
    m = np.arange(12, dtype=np.float32).reshape(3, 4)

    def build():
        mv = pg.data("m", [3, 4], "float32")
        shifts = pg.assign(np.array([1], np.int64))
        idx = pg.assign(np.array([[0], [1], [3]], np.int64))
        vals = pg.assign(np.array([[10.0], [20.0], [30.0]], np.float32))
        return [pg.roll(mv, shifts, axis=0), pg.put_along_axis(mv, idx, vals, 1, reduce="add"),
                pg.scatter_nd_add(mv, pg.assign(np.array([[2]], np.int64)), pg.assign(np.ones((1, 4), np.float32)))]

    main, _, got = _run(build, {"m": m})
    roll_op = next(op for op in main.global_block().ops if op.type == "roll")
    assert roll_op.input("ShiftsTensor") and list(roll_op.attr("shifts")) == []
    np.testing.assert_array_equal(got[0], np.roll(m, 1, axis=0))
    want = m.copy()
    want[0, 0] += 10
    want[1, 1] += 20
    want[2, 3] += 30
    np.testing.assert_array_equal(got[1], want)
    want = m.copy()
    want[2] += 1
    np.testing.assert_array_equal(got[2], want)


def test_inference_model_round_trip(tmp_path):
    """An inference program of these ops saves and loads (einsum's XShape/InnerCache and
    norm's Norm are PaddlePaddle's extra outputs) and computes the same."""
    m = np.random.default_rng(2).uniform(-1, 1, (3, 4)).astype(np.float32)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        mv = pg.data("m", [-1, 4], "float32")
        out = pg.einsum("ij,jk->ik", pg.l2_normalize(mv, 1), pg.flip(pg.transpose(mv, [1, 0]), [1]))
    exe, scope = Executor(CPUPlace()), Scope()
    (want,) = exe.run(main, feed={"m": m}, fetch_list=[out], scope=scope)
    pg.io.save_inference_model(tmp_path / "model", [mv], [out], exe, program=main, scope=scope)
    prog, feeds, fetches = pg.io.load_inference_model(tmp_path / "model", exe, scope=Scope())
    (got,) = exe.run(prog, feed={feeds[0]: m}, fetch_list=fetches, scope=Scope())
    np.testing.assert_array_equal(got, want)
    einsum_op = next(op for op in prog.global_block().ops if op.type == "einsum")
    assert not einsum_op.output("XShape") and not einsum_op.output("InnerCache")


def test_sort_is_argsorts_values_as_paddle_builds_it():
    """paddle.sort appends one argsort op and returns its Out: numpy's sort, either way round,
    along any axis."""
    m = np.random.default_rng(2).uniform(-1, 1, (4, 5)).astype(np.float32)

    def build():
        mv = pg.data("m", [4, 5], "float32")
        return [pg.sort(mv), pg.sort(mv, axis=0, descending=True)]

    main, _, got = _run(build, {"m": m})
    assert [op.type for op in main.global_block().ops] == ["argsort", "argsort"]
    np.testing.assert_array_equal(got[0], np.sort(m, axis=-1))
    np.testing.assert_array_equal(got[1], -np.sort(-m, axis=0))
