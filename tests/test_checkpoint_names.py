"""load_checkpoint into a model built again in the same process: unique names have moved on
(fc_0.w_0 is now fc_2.w_0); the error says so and names pg.unique_name.guard()."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import CheckpointError, Executor, Scope, load_checkpoint, save_checkpoint


def build(hidden=5):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 6])
        label = pg.data("label", [-1, 1], "int64")
        logits = pg.nn.fc(pg.nn.fc(x, hidden, activation="relu"), 3)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        pg.optimizer.Adam(0.01).minimize(loss)
    return main, startup


def _saved(tmp_path, main, startup):
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    save_checkpoint(tmp_path / "ckpt.keel", main, exe, scope)
    return exe, scope


def test_rebuilt_model_error_names_the_renamed_variables_and_the_guard(tmp_path):
    with pg.unique_name.guard():        # fixed names for the assertions; no guard per build
        main, startup = build()
        _saved(tmp_path, main, startup)
        again, _ = build()
    names = {v.name for v in again.global_block().all_parameters()}
    assert names == {"fc_2.w_0", "fc_2.b_0", "fc_3.w_0", "fc_3.b_0"}
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "ckpt.keel", again, Executor(), Scope())
    text = str(e.value)
    assert "fc_0.w_0: in the checkpoint but not a persistable variable of the program" in text
    assert "fc_2.w_0: persistable variable of the program missing from the checkpoint" in text
    hint = text[text.index("missing from the checkpoint\nThe checkpoint and the program"):]
    # 4 parameters, 4 x 4 Adam accumulators, the learning rate: 21 renamed variables
    assert "each have variables the other lacks, and 21 of them differ only in their unique-name suffixes" in hint
    assert "(checkpoint -> program: fc_0.b_0 -> fc_2.b_0, fc_0.w_0 -> fc_2.w_0, fc_1.b_0 -> fc_3.b_0, ...)" in hint
    assert "the same model built again in this process" in hint
    assert text.splitlines()[-1].startswith("Build the model under `with pg.unique_name.guard():`")


def test_the_guard_pattern_loads(tmp_path):
    with pg.unique_name.guard():
        main, startup = build()
    exe, scope = _saved(tmp_path, main, startup)
    with pg.unique_name.guard():
        again, _ = build()
    scope2 = Scope()
    load_checkpoint(tmp_path / "ckpt.keel", again, Executor(), scope2)
    for p in main.global_block().all_parameters():
        np.testing.assert_array_equal(scope2.get(p.name), scope.get(p.name))


def test_a_different_model_gets_no_renaming_hint(tmp_path):
    with pg.unique_name.guard():
        main, startup = build()
    _saved(tmp_path, main, startup)
    with pg.unique_name.guard():
        wider, _ = build(hidden=7)      # the same names, other shapes
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "ckpt.keel", wider, Executor(), Scope())
    assert "fc_0.w_0: checkpoint has shape [6, 5], program declares [6, 7]" in str(e.value)
    assert "unique_name" not in str(e.value)
    main2, startup2 = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main2, startup2):
        pg.nn.conv2d(pg.data("img", [-1, 1, 4, 4]), 2, 3)    # nothing in common
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "ckpt.keel", main2, Executor(), Scope())
    assert "conv2d_0.w_0: persistable variable of the program missing" in str(e.value)
    assert "unique_name" not in str(e.value)
