"""The character-level GPT of examples/train_gpt.py: Keel's training step and its cached
generation step (through the Predictor) against PyTorch eager on the same model, in one
process (medians).

    python benchmarks/bench_gpt.py [--repeat 10] [--tokens 128]

Training: batch 32 x context 128, 4 pre-norm layers of width 128 with 4 heads, GELU (tanh approximation),
softmax cross-entropy over the 103 characters, AdamW (lr 3e-3, decay 0.01); tokens/s is
batch x context / step time. PyTorch runs the same model from Keel's initialized weights
(its loss after the first step is checked against Keel's). The two are timed in alternating
blocks of calls, not call by call: PyTorch's OpenMP threads and numpy's OpenBLAS threads
busy-wait against each other when the two alternate closely (see bench_transformer.py).

Generation: batch 1, greedy, `--tokens` characters from an empty cache; Keel runs the
exported step program through `paddle.inference`'s Predictor (the new character and every
layer's key/value cache in, the logits and the grown caches out), PyTorch the same step in
`torch.no_grad()` with its own cache (torch.cat per step). The time per character is the
whole loop's divided by the characters; both generate the same text (checked).

AMP: the training step under `--amp O1` (float16, dynamic loss scaling) against float32,
both Keel's: the CPU's cost of emulating float16 (see `amp_rows`).

Peak memory: the training step's peak of live arrays (`executor.memory.peak_bytes`) without
and with recompute (`RecomputeOptimizer`, each block's output a checkpoint), the loss checked
equal.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "examples"))
from common import blas_line, measure, peer_skipped, table  # noqa: E402

import train_gpt  # noqa: E402  (the example's model, data and generator: the same code)
import keel as paddle  # noqa: E402

BATCH, CONTEXT, WIDTH, LAYERS, HEADS = 32, 128, 128, 4, 4
LR, DECAY = 3e-3, 0.01


# -- Keel ----------------------------------------------------------------------------------------
def keel_training(data, seed, amp=None):
    """(model, scope, one-step callable on a fixed batch, the batch); `amp`: the example's
    mixed-precision options (`paddle.static.amp.decorate`'s keywords), None for float32."""
    paddle.seed(seed)
    model = train_gpt.GPT(data.vocab_size, CONTEXT, WIDTH, LAYERS, HEADS)
    startup, programs, _, optimizer = train_gpt.build_programs(model, CONTEXT, LR, warmup=0, total_steps=10 ** 9,
                                                               weight_decay=DECAY, amp=amp)
    program, loss = programs["train"]
    exe, scope = paddle.Executor(), paddle.Scope()
    exe.run(startup, scope=scope)
    if amp is not None:
        optimizer.amp_init(paddle.CPUPlace(), scope=scope)
    x, y = data.batch(np.random.default_rng(seed), BATCH)

    def step():
        value, = exe.run(program, feed={"ids": x, "targets": y}, fetch_list=[loss], scope=scope)
        return float(value)
    return model, scope, step, (x, y)


# -- PyTorch eager (the same model, from the same weights) ---------------------------------------
def torch_model(weights):
    """A torch.nn.Module computing what train_gpt.GPT computes, its parameters copied from
    `weights` (structured name -> array; Keel's Linear weights are [in, out])."""
    import torch
    F = torch.nn.functional
    params = torch.nn.ParameterDict({k.replace(".", "/"): torch.nn.Parameter(torch.tensor(v))
                                     for k, v in weights.items()})
    dh = WIDTH // HEADS

    def p(name):
        return params[name.replace(".", "/")]

    def linear(x, name):
        return torch.addmm(p(name + ".bias"), x.reshape(-1, x.shape[-1]), p(name + ".weight")).view(
            *x.shape[:-1], -1)

    def norm(x, name):
        return F.layer_norm(x, (WIDTH,), p(name + ".weight"), p(name + ".bias"), 1e-5)

    def attention(x, i, mask, cache):
        b, t = x.shape[:2]
        q, k, v = (z.view(b, t, HEADS, dh).transpose(1, 2)
                   for z in linear(x, f"blocks.{i}.attention.qkv").split(WIDTH, -1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        scores = (q * dh ** -0.5) @ k.transpose(-1, -2)
        if mask is not None:
            scores = scores + mask
        out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, t, WIDTH)
        return linear(out, f"blocks.{i}.attention.proj"), (k, v)

    def blocks(x, mask, caches):
        grown = []
        for i in range(LAYERS):
            a, cache = attention(norm(x, f"blocks.{i}.norm1"), i, mask, caches[i] if caches else None)
            x = x + a
            h = F.gelu(linear(norm(x, f"blocks.{i}.norm2"), f"blocks.{i}.mlp.0"), approximate="tanh")
            x = x + linear(h, f"blocks.{i}.mlp.2")
            grown.append(cache)
        return linear(norm(x, "norm"), "head"), grown

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = params
            self.register_buffer("mask", torch.triu(torch.full((CONTEXT, CONTEXT), -1e9), 1))

        def forward(self, ids):
            x = F.embedding(ids, p("tokens.weight")) + p("positions.weight")[:ids.shape[1]]
            return blocks(x, self.mask, None)[0]

        def step(self, token, position, caches):
            x = F.embedding(token, p("tokens.weight")) + p("positions.weight")[position]
            logits, grown = blocks(x, None, caches)
            return logits[:, -1], grown
    return Model()


def torch_training(weights, batch, no_decay):
    """A one-step callable for PyTorch eager, or None where it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    model = torch_model(weights)
    groups = [{"params": [q for k, q in model.params.items() if k.replace("/", ".") not in no_decay],
               "weight_decay": DECAY},
              {"params": [q for k, q in model.params.items() if k.replace("/", ".") in no_decay],
               "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, LR)
    x, y = (torch.from_numpy(a) for a in batch)

    def step():
        opt.zero_grad()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()
    return step, model


# -- generation ----------------------------------------------------------------------------------
def keel_generation(generator, tokens):
    """Greedy generation of `tokens` characters from an empty cache through the Predictor."""
    def run():
        caches, token, out = generator.empty_caches(), 0, []
        for position in range(tokens):
            logits, caches = generator.step(token, position, caches)
            token = int(np.argmax(logits))
            out.append(token)
        return out
    return run


def torch_generation(model, tokens):
    import torch

    def run():
        with torch.no_grad():
            caches = [(torch.zeros(1, HEADS, 0, WIDTH // HEADS), torch.zeros(1, HEADS, 0, WIDTH // HEADS))
                      for _ in range(LAYERS)]
            token, out = 0, []
            for position in range(tokens):
                logits, caches = model.step(torch.tensor([[token]]), torch.tensor([position]), caches)
                token = int(torch.argmax(logits[0]))
                out.append(token)
        return out
    return run


def in_blocks(contenders, repeat, blocks=3, clock=time.perf_counter):
    """Median seconds per call of each contender, timed in alternating blocks of calls
    (Keel's, PyTorch's, Keel's, ...: `blocks` rounds of about repeat / blocks calls each,
    after a warm-up), so that a change in the machine's load hits both, while within a block
    neither's threads wait on the other's (see the module doc)."""
    times = {name: [] for name in contenders}
    per_block = max(1, round(repeat / blocks))
    for round_ in range(blocks):
        for name, fn in contenders.items():
            block = measure({name: fn}, repeat=per_block, warmup=2 if round_ == 0 else 1, per_call=True,
                            clock=clock)
            times[name] += block[name]
    return {name: median(ts) for name, ts in times.items()}


def limit_threads(n):
    """The same thread count for both: PyTorch's intra-op threads and numpy's BLAS (through
    threadpoolctl, which scikit-learn installs)."""
    from threadpoolctl import threadpool_limits
    threadpool_limits(n)
    try:
        import torch
        torch.set_num_threads(n)
    except ImportError:
        pass


def recompute_rows(data, seed=7):
    """Peak training memory of the GPT without and with recompute (each block's output a
    checkpoint): rows of (workload, Keel, peer, ratio), the peer column the plain step's."""
    from keel.executor.memory import peak_bytes
    from keel.program.incubate.optimizer import RecomputeOptimizer

    peaks, losses = {}, {}
    for recompute in (False, True):
        paddle.seed(seed)
        model = train_gpt.GPT(data.vocab_size, CONTEXT, WIDTH, LAYERS, HEADS)
        main, startup = paddle.Program(), paddle.Program()
        startup.random_seed = main.random_seed = seed
        with paddle.program_guard(main, startup):
            ids = paddle.static.data("ids", [-1, CONTEXT], "int64")
            targets = paddle.static.data("targets", [-1, CONTEXT], "int64")
            logits = model(ids)
            loss = paddle.mean(paddle.nn.functional.softmax_with_cross_entropy(
                paddle.reshape(logits, [-1, logits.shape[-1]]), paddle.reshape(targets, [-1, 1])))
            opt = paddle.optimizer.AdamW(LR, parameters=model.parameters(), weight_decay=DECAY)
            if recompute:
                opt = RecomputeOptimizer(opt)
                opt._set_checkpoints(model.block_outputs)
            opt.minimize(loss)
        exe, scope = paddle.Executor(), paddle.Scope()
        exe.run(startup, scope=scope)
        x, y = data.batch(np.random.default_rng(seed), BATCH)
        exe.run(main, feed={"ids": x, "targets": y}, fetch_list=[loss], scope=scope)  # plan made
        (value,), peaks[recompute] = peak_bytes(exe.run, main, feed={"ids": x, "targets": y},
                                                fetch_list=[loss], scope=scope)
        losses[recompute] = float(value)
    print(f"check, recompute: loss {losses[True]:.6f} (recompute), {losses[False]:.6f} (without)")
    assert losses[True] == losses[False], "recompute changed the loss"
    mib = {k: v / 2 ** 20 for k, v in peaks.items()}
    return [("training step peak memory, recompute vs without", f"{mib[True]:.1f} MiB",
             f"{mib[False]:.1f} MiB (Keel without)", f"{peaks[True] / peaks[False]:.2f}x")]


def amp_rows(data, float32_step, float32_loss, repeat, clock, seed=7):
    """The training step under AMP O1 float16 against `float32_step` (Keel's, whose first
    step from the same weights gave `float32_loss`), timed in alternating blocks: on numpy,
    float16 is emulated (each matmul converts its operands to float32 and its result back;
    elementwise float16 arithmetic converts per element), so this is the CPU's cost of
    running a mixed-precision program, not a speed-up."""
    _, _, amp_step, _ = keel_training(data, seed, amp={"level": "O1", "dtype": "float16"})
    amp_loss = amp_step()
    print(f"check, AMP O1 float16: first-step loss {amp_loss:.6f} (float32 {float32_loss:.6f})")
    assert abs(amp_loss - float32_loss) < 1e-2 * float32_loss, "AMP's loss is far from float32's"
    t = in_blocks({"amp": amp_step, "float32": float32_step}, repeat, clock=clock)
    return [("training step, AMP O1 float16 vs float32", f"{t['amp'] * 1e3:.1f} ms",
             f"{t['float32'] * 1e3:.1f} ms (Keel float32)", f"{t['amp'] / t['float32']:.2f}x")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=128, help="characters generated per timed run")
    parser.add_argument("--threads", type=int, default=0,
                        help="limit numpy's BLAS and PyTorch to this many threads (0: as they start)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time CPU seconds of the process, not the wall's (with --threads 1: what "
                             "an idle core would take, on a machine busy with other work)")
    args = parser.parse_args(argv)
    print(blas_line(), flush=True)
    if args.threads:
        limit_threads(args.threads)
    if not 1 <= args.tokens <= CONTEXT:
        parser.error(f"--tokens must be 1..{CONTEXT} (the model's positions)")
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time needs --threads 1 (idle threads spinning would count as work)")
    clock = time.process_time if args.cpu_time else time.perf_counter
    data = train_gpt.CharData(train_gpt.corpus(), CONTEXT)
    model, scope, keel_step, batch = keel_training(data, seed=7)
    weights = model.state_dict(scope=scope)
    no_decay = {k for k in weights if "norm" in k or k.endswith("bias")}
    peer = torch_training(weights, batch, no_decay)
    first_loss = keel_step()
    if peer is None:
        peer_skipped("PyTorch", "pip install torch")
    else:
        k_loss, t_loss = first_loss, peer[0]()
        print(f"check, one step from the same weights: loss {k_loss:.6f} (Keel), {t_loss:.6f} (PyTorch)")
        assert abs(k_loss - t_loss) < 1e-4 * abs(t_loss), "Keel and PyTorch compute different losses"

    train = {"keel": keel_step}
    if peer is not None:
        train["torch"] = peer[0]
    t = in_blocks(train, args.repeat, clock=clock)
    tokens = BATCH * CONTEXT
    rows = [("training step (32 x 128 characters, AdamW)", f"{t['keel'] * 1e3:.1f} ms ({tokens / t['keel']:,.0f} tok/s)",
             f"{t['torch'] * 1e3:.1f} ms ({tokens / t['torch']:,.0f} tok/s)" if "torch" in t else "not installed",
             f"{t['keel'] / t['torch']:.2f}x" if "torch" in t else "-")]

    with tempfile.TemporaryDirectory() as folder:
        prefix = str(Path(folder) / "gpt")
        train_gpt.export(model, data, prefix, scope)
        generator = train_gpt.Generator(prefix)
        g = {"keel": keel_generation(generator, args.tokens)}
        if peer is not None:
            # the trained weights after the timed steps, so both generate from the same model
            torch_model_now = torch_model(model.state_dict(scope=scope))
            g["torch"] = torch_generation(torch_model_now, args.tokens)
            same = g["keel"]() == g["torch"]()
            print(f"check, greedy generation of {args.tokens} characters: the same text: {same}")
        gt = in_blocks(g, max(3, args.repeat // 2), clock=clock)
    per = {k: v / args.tokens for k, v in gt.items()}
    rows.append((f"cached generation, per character (batch 1, {args.tokens} steps)", f"{per['keel'] * 1e3:.2f} ms",
                 f"{per['torch'] * 1e3:.2f} ms" if "torch" in per else "not installed",
                 f"{per['keel'] / per['torch']:.2f}x" if "torch" in per else "-"))
    rows += recompute_rows(data)
    rows += amp_rows(data, keel_step, first_loss, args.repeat, clock)
    what = "CPU seconds, 1 thread" if args.cpu_time else f"wall time, {args.threads or 'default'} threads"
    print(table(f"GPT benchmark (medians of {what}; ratio = Keel / PyTorch eager)", rows,
                ("workload", "Keel", "PyTorch eager", "ratio")))


if __name__ == "__main__":
    main()
