"""Train a small CNN on the handwritten digits that ship with scikit-learn (8x8 images,
1,797 of them; no download), evaluate it on a held-out split and export it for inference.

    python -m pip install -e ".[examples]" && python examples/train_digits.py
    python examples/train_digits.py --nproc 2      # data-parallel on 2 processes (the "dist" extra)

The whole life of the model is one define-then-run program: the layers below define it,
`minimize` appends its backward and Adam ops, `clone(for_test=True)` gives the evaluation
program, and `save_inference_model` writes the pruned inference program and its weights
as PaddlePaddle-compatible `.pdmodel` / `.pdiparams` files. A fixed seed makes every run
print the same numbers.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope

SEED = 2024


def load_data():
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]   # [N, 1, 8, 8] in [0, 1]
    labels = digits.target.astype(np.int64)[:, None]                     # [N, 1]
    order = np.random.default_rng(SEED).permutation(len(images))
    images, labels = images[order], labels[order]
    mean, std = images.mean(), images.std()
    images = (images - mean) / std
    n_test = len(images) // 5
    return (images[n_test:], labels[n_test:]), (images[:n_test], labels[:n_test])


def build(steps_per_epoch: int, epochs: int, nranks: int = 1):
    main, startup = pg.Program(), pg.Program()
    main.random_seed = startup.random_seed = SEED
    with pg.program_guard(main, startup):
        image = pg.data("image", shape=[-1, 1, 8, 8], dtype="float32")
        label = pg.data("label", shape=[-1, 1], dtype="int64")
        h = pg.nn.conv2d(image, num_filters=32, filter_size=3, padding=1)
        h = pg.nn.batch_norm(h, act="relu")
        h = pg.nn.conv2d(h, num_filters=64, filter_size=3, padding=1)
        h = pg.nn.batch_norm(h, act="relu")
        h = pg.nn.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)       # [N, 64, 4, 4]
        h = pg.nn.fc(h, 128, activation="relu")
        h = pg.nn.dropout(h, dropout_prob=0.3, dropout_implementation="upscale_in_train")
        logits = pg.nn.fc(h, 10)
        probs = pg.softmax(logits)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        accuracy = pg.nn.accuracy(probs, label)
        test_program = main.clone(for_test=True)
        schedule = pg.lr.CosineDecay(3e-3, T_max=steps_per_epoch * epochs)
        optimizer = pg.optimizer.Adam(learning_rate=schedule, weight_decay=1e-4)
        if nranks > 1:  # average the gradients over the ranks; batch norm over the global batch
            from keel.distributed import fleet
            optimizer = fleet.distributed_optimizer(optimizer, fleet.DistributedStrategy(sync_batch_norm=True))
        optimizer.minimize(loss)
    return main, startup, test_program, schedule, image, probs, loss, accuracy


def evaluate(exe, test_program, scope, images, labels, probs, batch=256):
    correct = 0
    for i in range(0, len(images), batch):
        p, = exe.run(test_program, feed={"image": images[i:i + batch]}, fetch_list=[probs], scope=scope)
        correct += int((p.argmax(1) == labels[i:i + batch, 0]).sum())
    return correct / len(images)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", default="out/digits", help="prefix of the exported inference model")
    parser.add_argument("--nproc", type=int, default=1, help="processes to train on, each a share of every batch")
    args = parser.parse_args(argv)
    if args.nproc > 1 and "PADDLE_TRAINERS_NUM" not in os.environ:  # start the ranks, this script on each
        launch = [sys.executable, "-m", "keel.distributed.launch", "--nproc_per_node", str(args.nproc),
                  "--log_dir", os.path.join(os.path.dirname(args.out) or ".", "log"), os.path.abspath(__file__)]
        sys.exit(subprocess.run(launch + (sys.argv[1:] if argv is None else list(argv))).returncode)
    rank, nranks = 0, 1
    if args.nproc > 1:
        from keel import distributed
        env = distributed.init_parallel_env()
        rank, nranks = env.rank, env.world_size

    (train_x, train_y), (test_x, test_y) = load_data()
    steps = (len(train_x) + args.batch_size - 1) // args.batch_size
    main_program, startup, test_program, schedule, image, probs, loss, accuracy = build(steps, args.epochs, nranks)
    print(f"digits: {len(train_x)} training and {len(test_x)} test images; "
          f"{len(main_program.global_block().ops)} ops in the training program")

    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    shuffle = np.random.default_rng(SEED)
    for epoch in range(1, args.epochs + 1):
        start, losses, accs = time.perf_counter(), [], []
        order = shuffle.permutation(len(train_x))
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size][rank::nranks]  # this rank's share of the batch
            l, a = exe.run(main_program, feed={"image": train_x[idx], "label": train_y[idx]},
                           fetch_list=[loss, accuracy], scope=scope)
            losses.append(float(l))
            accs.append(float(a))
            schedule.step()
        seconds = time.perf_counter() - start
        print(f"epoch {epoch:2d}  loss {np.mean(losses):.4f}  train accuracy {np.mean(accs):.4f}  "
              f"{len(train_x) / seconds:,.0f} examples/s", flush=True)

    if rank != 0:  # every rank holds the same parameters: rank 0 evaluates and exports them
        return None
    test_accuracy = evaluate(exe, test_program, scope, test_x, test_y, probs)
    pg.io.save_inference_model(args.out, [image], [probs], exe, program=test_program, scope=scope)
    print(f"inference model written to {args.out}.pdmodel and {args.out}.pdiparams")
    print(f"test accuracy: {test_accuracy:.4f}")
    return test_accuracy


if __name__ == "__main__":
    main()
