"""PaddlePaddle's static-graph tutorial workflow: enable_static, static.data, static.nn.fc,
an optimizer's minimize, Executor runs (of a CompiledProgram too), save/load of the
program's values, save_inference_model / load_inference_model. The same file runs in
PaddlePaddle with its first import line changed to `import paddle`.

    python examples/paddle_static_tutorial.py [out_dir]
"""
import keel as paddle  # import paddle
import argparse
import os
import tempfile

import numpy as np


def main(out_dir):
    paddle.enable_static()
    paddle.seed(0)
    main_program, startup_program = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main_program, startup_program):
        x = paddle.static.data(name="x", shape=[None, 13], dtype="float32")
        y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
        hidden = paddle.static.nn.fc(x, size=16, activation="relu")
        pred = paddle.static.nn.fc(hidden, size=1)
        loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
        test_program = main_program.clone(for_test=True)
        paddle.optimizer.SGD(learning_rate=0.05).minimize(loss)

    rng = np.random.default_rng(0)
    true_w = rng.normal(size=(13, 1)).astype("float32")
    data_x = rng.normal(size=(256, 13)).astype("float32")
    data_y = data_x @ true_w + 0.5

    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup_program)
    compiled = paddle.static.CompiledProgram(main_program)
    for epoch in range(30):
        for start in range(0, 256, 64):
            feed = {"x": data_x[start:start + 64], "y": data_y[start:start + 64]}
            loss_value, = exe.run(compiled, feed=feed, fetch_list=[loss])
    print(f"train loss {float(loss_value):.4f}")
    test_loss, = exe.run(test_program, feed={"x": data_x, "y": data_y}, fetch_list=[loss])

    # the program's values: saved, overwritten by a fresh startup run, loaded back
    paddle.static.save(main_program, os.path.join(out_dir, "checkpoint", "model"))
    exe.run(startup_program)
    paddle.static.load(main_program, os.path.join(out_dir, "checkpoint", "model"), exe)
    reloaded_loss, = exe.run(test_program, feed={"x": data_x, "y": data_y}, fetch_list=[loss])

    path = os.path.join(out_dir, "inference", "linear")
    paddle.static.save_inference_model(path, [x], [pred], exe, program=main_program)
    program, feed_names, fetch_targets = paddle.static.load_inference_model(path, exe)
    served, = exe.run(program, feed={feed_names[0]: data_x[:4]}, fetch_list=fetch_targets)
    paddle.disable_static()
    print(f"test loss {float(test_loss):.4f} reloaded {float(reloaded_loss):.4f}")
    print("served", served.ravel().round(3).tolist())
    return float(test_loss), float(reloaded_loss), served


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="PaddlePaddle's static-graph workflow: train, save, load, serve.")
    parser.add_argument("out_dir", nargs="?", help="where the files go (default: a new temporary directory)")
    main(parser.parse_args().out_dir or tempfile.mkdtemp())
