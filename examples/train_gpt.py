"""A character-level GPT trained on Python's own documentation, exported, and served by the
Predictor, which generates text one character at a time with a key/value cache.

    python examples/train_gpt.py                      # the full run (about 6 minutes of one core)
    python examples/train_gpt.py --steps 20           # a quick smoke run
    python examples/train_gpt.py --amp O1             # mixed precision: float16, dynamic loss scaling

The corpus is on every machine with no download: the English text of Python's
documentation that the standard library ships for `help()` (`pydoc_data/topics.py`), about
465,000 characters. The model is a decoder-only Transformer (pre-norm blocks, learned
positions, causal self attention, GELU MLPs) written as a `nn.Layer` as PaddlePaddle's
documentation writes one; only the import line differs (`import keel as paddle`).

Two inference programs are exported from the one trained model: `<out>.pdmodel` (the whole
context in, the next character's logits out) and `<out>_step.pdmodel`, one decoding step
(the new character and its position in, with every layer's key/value cache; the logits and
the caches grown by one position out). Generation runs the step program through
`paddle.inference`'s Predictor, carrying the caches from each step's outputs to the next
step's inputs, greedy and with top-k / top-p sampling.

`--amp O1|O2` trains with PaddlePaddle's static automatic mixed precision
(`paddle.static.amp.decorate` on the AdamW): matmuls in float16 (`--amp-dtype bfloat16`:
bfloat16) with float32 accumulation, the loss, softmax, layer norms and embeddings in float32,
and for float16 a dynamic loss scale (printed each epoch) that skips a step whose gradients
overflow. O2 keeps the parameters themselves in low precision and updates float32 master
copies. Either way the exported programs hold float32 parameters (O2's master weights), so
inference and generation are those of a float32 model. On the CPU mixed precision only costs
time: an O1 float16 step takes about 3x float32's CPU time (the casts, each matmul's
conversions to float32 and back, numpy's float16 arithmetic); its point is a GPU's
half-precision matmuls.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time

import numpy as np

import keel as paddle
from keel import nn
from keel.program.default import global_seed
from keel.static import InputSpec

# -- the corpus ----------------------------------------------------------------------------------


def corpus() -> str:
    """Python's documentation topics (pydoc_data), in a fixed order."""
    import pydoc_data.topics
    topics = pydoc_data.topics.topics
    return "\n\n".join(topics[key] for key in sorted(topics))


class CharData:
    """The corpus as character ids: the first 90% for training, the rest for validation."""

    def __init__(self, text: str, context: int):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        ids = np.fromiter((self.index[c] for c in text), dtype=np.int64, count=len(text))
        split = int(len(ids) * 0.9)
        self.train, self.valid = ids[:split], ids[split:]
        self.context = context

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """Character ids (characters the corpus lacks are left out)."""
        return [self.index[c] for c in text if c in self.index]

    def batch(self, rng, batch_size: int):
        """`batch_size` windows at random places of the training text: inputs, next characters."""
        starts = rng.integers(0, len(self.train) - self.context - 1, batch_size)
        windows = self.train[starts[:, None] + np.arange(self.context + 1)]
        return windows[:, :-1], windows[:, 1:]

    def validation_batches(self, batch_size: int):
        """The validation text as consecutive non-overlapping windows."""
        n = (len(self.valid) - 1) // self.context
        starts = np.arange(n) * self.context
        for i in range(0, n, batch_size):
            windows = self.valid[starts[i:i + batch_size, None] + np.arange(self.context + 1)]
            yield windows[:, :-1], windows[:, 1:]


# -- the model -----------------------------------------------------------------------------------


class CausalSelfAttention(nn.Layer):
    """Multi-head self attention where each position sees itself and the positions before it.
    With `cache` (the keys and values of the earlier positions, [batch, heads, past, head_dim])
    `x` holds new positions only; their keys and values are appended to the cache."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def _split_heads(self, x):  # [batch, time, width] -> [batch, heads, time, head_dim]
        return paddle.transpose(paddle.reshape(x, [0, 0, self.heads, self.head_dim]), [0, 2, 1, 3])

    def forward(self, x, mask=None, cache=None):
        q, k, v = (self._split_heads(t) for t in paddle.split(self.qkv(x), 3, axis=-1))
        if cache is not None:
            k, v = paddle.concat([cache[0], k], axis=2), paddle.concat([cache[1], v], axis=2)
        scores = paddle.matmul(paddle.scale(q, self.head_dim ** -0.5), k, transpose_y=True)
        if mask is not None:
            scores = scores + mask
        out = paddle.matmul(paddle.softmax(scores), v)
        out = paddle.reshape(paddle.transpose(out, [0, 2, 1, 3]), [0, 0, self.heads * self.head_dim])
        return self.proj(out), (k, v)


class Block(nn.Layer):
    """x + attention(norm(x)), then x + MLP(norm(x)) (pre-norm, as GPT-2)."""

    def __init__(self, width, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads)
        # GELU's tanh approximation, as GPT-2's (on numpy 2.4x cheaper than erf, forward and gradient)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate=True), nn.Linear(4 * width, width))

    def forward(self, x, mask=None, cache=None):
        attended, cache = self.attention(self.norm1(x), mask, cache)
        x = x + attended
        return x + self.mlp(self.norm2(x)), cache


class GPT(nn.Layer):
    """Character embeddings plus learned position embeddings, `layers` blocks, a final norm and
    a linear head to the vocabulary."""

    def __init__(self, vocab_size, context=128, width=128, layers=4, heads=4):
        super().__init__()
        self.context, self.layers, self.heads, self.head_dim = context, layers, heads, width // heads
        self.tokens = nn.Embedding(vocab_size, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.LayerList([Block(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size)

    def forward(self, ids):
        """Logits [batch, time, vocab] for `ids` [batch, time] (time = the context)."""
        t = self.context
        x = self.tokens(ids) + self.positions(paddle.arange(t))
        mask = paddle.triu(paddle.full([t, t], -1e9), diagonal=1)  # no attention to later positions
        self.block_outputs = []  # recompute's natural checkpoints (benchmarks/bench_gpt.py)
        for block in self.blocks:
            x, _ = block(x, mask)
            self.block_outputs.append(x)
        return self.head(self.norm(x))

    def step(self, ids, position, *caches):
        """One decoding step: `ids` [batch, 1] at `position` [1], each layer's (keys, values)
        caches. Returns the logits [batch, vocab] and the caches one position longer."""
        x = self.tokens(ids) + self.positions(position)
        grown = []
        for i, block in enumerate(self.blocks):
            x, cache = block(x, cache=caches[2 * i:2 * i + 2])
            grown += cache
        logits = self.head(self.norm(x))
        return [paddle.reshape(logits, [-1, logits.shape[-1]])] + grown


class DecodeStep(nn.Layer):
    """`GPT.step` as a layer of its own, to export it (it shares the GPT's parameters)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, ids, position, *caches):
        return self.gpt.step(ids, position, *caches)


# -- training ------------------------------------------------------------------------------------


def build_programs(model, context, learning_rate, warmup, total_steps, weight_decay, amp=None):
    """The training program (loss, backward, AdamW with warmup and cosine decay) and the
    evaluation program (loss only), sharing the parameters by name. `amp`: None, or the
    keyword arguments of `paddle.static.amp.decorate` (level "O1"/"O2", dtype
    "float16"/"bfloat16", init_loss_scaling...), which rewrites the training program for
    mixed precision. Returns the startup program, {mode: (program, loss)}, the schedule and
    the optimizer (under AMP the decorated one: it knows the loss-scale variable and O2's
    master weights)."""
    schedule = paddle.lr.CosineAnnealingDecay(learning_rate, T_max=max(1, total_steps - warmup),
                                              eta_min=learning_rate / 10)
    if warmup > 0:
        schedule = paddle.lr.LinearWarmup(schedule, warmup_steps=warmup, start_lr=learning_rate / 100,
                                          end_lr=learning_rate)
    startup = paddle.Program()
    startup.random_seed = global_seed()
    programs, optimizer = {}, None
    for mode in ("train", "eval"):
        main = paddle.Program()
        main.random_seed = startup.random_seed
        with model.mode(training=mode == "train"), paddle.program_guard(main, startup):
            ids = paddle.static.data("ids", [-1, context], "int64")
            targets = paddle.static.data("targets", [-1, context], "int64")
            logits = model(ids)
            loss = paddle.mean(paddle.nn.functional.softmax_with_cross_entropy(
                paddle.reshape(logits, [-1, logits.shape[-1]]), paddle.reshape(targets, [-1, 1])))
            if mode == "train":
                no_decay = {p.name for n, p in model.named_parameters() if "norm" in n or n.endswith("bias")}
                optimizer = paddle.optimizer.AdamW(schedule, parameters=model.parameters(),
                                                   weight_decay=weight_decay,
                                                   apply_decay_param_fun=lambda name: name not in no_decay)
                if amp is not None:
                    optimizer = paddle.static.amp.decorate(optimizer, **amp)
                optimizer.minimize(loss)
        programs[mode] = (main, loss)
    return startup, programs, schedule, optimizer


def progress(step, steps, loss, started, width=30):
    """A one-line progress bar, redrawn in place (about 30 times an epoch)."""
    if step % max(1, steps // width) and step != steps:
        return
    done = int(width * step / steps)
    elapsed = time.perf_counter() - started
    sys.stdout.write(f"\r  [{'=' * done}{'.' * (width - done)}] {step}/{steps} loss {loss:.4f} {elapsed:5.1f}s")
    sys.stdout.flush()


def evaluate(exe, program, loss, data, batch_size, scope):
    """The mean loss per character over the validation text."""
    total, count = 0.0, 0
    for x, y in data.validation_batches(batch_size):
        value, = exe.run(program, feed={"ids": x, "targets": y}, fetch_list=[loss], scope=scope)
        total += float(value) * len(x)
        count += len(x)
    return total / count


def train(args, data, model, scope):
    steps_per_epoch = args.steps_per_epoch or len(data.train) // (args.batch_size * args.context)
    total_steps = args.steps or args.epochs * steps_per_epoch
    amp = None if args.amp == "off" else {"level": args.amp, "dtype": args.amp_dtype}
    dynamic_scaling = amp is not None and args.amp_dtype == "float16"
    if amp is not None:   # bfloat16 has float32's range: no loss scaling (nor its unscaling pass)
        amp["init_loss_scaling"] = args.init_loss_scaling if dynamic_scaling else 1.0
    startup, programs, schedule, optimizer = build_programs(
        model, args.context, args.lr, min(args.warmup, total_steps // 5), total_steps, args.weight_decay, amp)
    (train_prog, train_loss), (eval_prog, eval_loss) = programs["train"], programs["eval"]
    exe = paddle.Executor()
    exe.run(startup, scope=scope)
    fetch, scale = [train_loss], None
    if amp is not None:
        # O2: the parameters to low precision (their float32 masters stay), and the evaluation
        # program reads them so; O1: nothing to do
        optimizer.amp_init(paddle.CPUPlace(), scope=scope, test_program=eval_prog, use_fp16_test=True)
    if dynamic_scaling:
        fetch.append(optimizer.get_loss_scaling())
        scale = float(np.asarray(scope.get(fetch[-1].name)).reshape(-1)[0])
    params = sum(math.prod(p.shape) for p in model.parameters())
    print(f"corpus: {len(data.train):,} training and {len(data.valid):,} validation characters, "
          f"{data.vocab_size} distinct; model: {params:,} parameters"
          + ("" if amp is None else f"; AMP {args.amp} {args.amp_dtype}"))
    rng = np.random.default_rng(args.seed)
    deadline = time.perf_counter() + args.minutes * 60 if args.minutes else math.inf
    step, epoch, started = 0, 0, time.perf_counter()
    skipped = 0
    # float16 overflows in the forward or backward pass are expected: the loss scale sees them
    # (the step is skipped and the scale shrinks), so numpy's warnings about them are noise
    with np.errstate(over="ignore", invalid="ignore") if amp else contextlib.nullcontext():
        while step < total_steps and time.perf_counter() < deadline:
            epoch += 1
            steps = min(steps_per_epoch, total_steps - step)
            epoch_start, losses = time.perf_counter(), []
            for i in range(steps):
                x, y = data.batch(rng, args.batch_size)
                value, *rest = exe.run(train_prog, feed={"ids": x, "targets": y}, fetch_list=fetch, scope=scope)
                schedule.step()
                if rest:   # the loss scale shrinks only on a step whose gradients overflowed (skipped)
                    new_scale = float(np.asarray(rest[0]).reshape(-1)[0])
                    skipped += new_scale < scale
                    scale = new_scale
                losses.append(float(value))
                step += 1
                progress(i + 1, steps, losses[-1], epoch_start)
                if time.perf_counter() >= deadline:
                    break
            seconds = time.perf_counter() - epoch_start
            valid = evaluate(exe, eval_prog, eval_loss, data, args.batch_size, scope)
            elapsed = time.perf_counter() - started
            tokens = len(losses) * args.batch_size * args.context
            amp_note = "" if scale is None else f"  loss scale {scale:g} ({skipped} skipped)"
            print(f"\repoch {epoch:2d}  step {step:5d}  train loss {np.mean(losses):.4f}  valid loss {valid:.4f}  "
                  f"tokens/s {tokens / seconds:,.0f}  elapsed {elapsed:.0f}s{amp_note}")
    if amp is not None:   # O2: the float32 master weights back under the parameters' names, for export
        optimizer.restore_master_weights(scope)


# -- export and generation -----------------------------------------------------------------------


def export(model, data, out, scope):
    """`out.pdmodel` (context in, logits out), `out_step.pdmodel` (one cached decoding step) and
    `out.vocab.json` (the characters by id, and the context length)."""
    directory = os.path.dirname(out)
    if directory:
        os.makedirs(directory, exist_ok=True)
    paddle.jit.save(model, out, input_spec=[InputSpec([None, model.context], "int64", "ids")], scope=scope)
    cache_specs = [InputSpec([None, model.heads, None, model.head_dim], "float32", f"{kind}_cache_{i}")
                   for i in range(model.layers) for kind in ("key", "value")]
    paddle.jit.save(DecodeStep(model), out + "_step",
                    input_spec=[InputSpec([None, 1], "int64", "ids"), InputSpec([1], "int64", "position"),
                                *cache_specs], scope=scope)
    with open(out + ".vocab.json", "w", encoding="utf-8") as f:
        json.dump({"chars": data.chars, "context": model.context}, f, ensure_ascii=False)


class Generator:
    """Text from the exported step program through the Predictor: each step feeds the newest
    character, its position and the caches the previous step returned."""

    def __init__(self, prefix):
        self.predictor = paddle.inference.create_predictor(paddle.inference.Config(prefix + "_step"))
        with open(prefix + ".vocab.json", encoding="utf-8") as f:
            vocab = json.load(f)
        self.chars, self.context = vocab["chars"], int(vocab["context"])
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.cache_names = self.predictor.get_input_names()[2:]   # after ids and position
        shape = self.predictor.get_input_handle(self.cache_names[0]).shape()
        self.heads, self.head_dim = shape[1], shape[3]

    def empty_caches(self):
        return [np.zeros((1, self.heads, 0, self.head_dim), np.float32) for _ in self.cache_names]

    def step(self, token, position, caches):
        """One decoding step: (the next character's logits, the grown caches)."""
        outputs = self.predictor.run([np.array([[token]], np.int64), np.array([position], np.int64), *caches])
        return outputs[0][0], outputs[1:]

    def generate(self, prompt, length, rng=None, top_k=0, top_p=1.0, temperature=1.0):
        """`prompt` continued by `length` characters: greedy when `rng` is None, else sampled from
        the `top_k` most likely (0: all) within cumulative probability `top_p`. When the cache
        fills the context, decoding restarts from the last half context."""
        ids = [self.index[c] for c in prompt if c in self.index] or [0]
        caches, logits = self._fill(ids)
        for _ in range(length):
            token = choose(logits, rng, top_k, top_p, temperature)
            ids.append(token)
            if caches[0].shape[2] == self.context:   # positions run out: restart from the last half
                caches, logits = self._fill(ids[-(self.context // 2):])
            else:
                logits, caches = self.step(token, caches[0].shape[2], caches)
        return "".join(self.chars[i] for i in ids)

    def _fill(self, ids):
        """Run the prompt through the step program (its last `context` characters)."""
        caches, logits = self.empty_caches(), None
        for position, token in enumerate(ids[-self.context:]):
            logits, caches = self.step(token, position, caches)
        return caches, logits


def choose(logits, rng, top_k, top_p, temperature):
    """The next character: argmax (rng None), else a draw from the top-k / top-p distribution."""
    if rng is None:
        return int(np.argmax(logits))
    logits = logits.astype(np.float64) / temperature
    order = np.argsort(-logits)
    if top_k:
        order = order[:top_k]
    probs = np.exp(logits[order] - logits[order[0]])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), top_p) + 1)
    probs = probs[:keep] / probs[:keep].sum()
    return int(order[rng.choice(keep, p=probs)])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training text's size")
    parser.add_argument("--steps", type=int, default=0, help="train this many steps in all (a quick run)")
    parser.add_argument("--steps-per-epoch", type=int, default=0, help="default: the training text's size")
    parser.add_argument("--minutes", type=float, default=0, help="stop training after this long (0: no limit)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--amp", choices=["off", "O1", "O2"], default="off",
                        help="automatic mixed precision level (paddle.static.amp.decorate)")
    parser.add_argument("--amp-dtype", choices=["float16", "bfloat16"], default="float16",
                        help="the low-precision type (float16 uses dynamic loss scaling)")
    parser.add_argument("--init-loss-scaling", type=float, default=2.0 ** 16,
                        help="float16's first loss scale (halved on each step whose gradients overflow)")
    parser.add_argument("--prompt", default="The with statement")
    parser.add_argument("--generate", type=int, default=200, help="characters to generate")
    parser.add_argument("--out", default="out/gpt", help="prefix of the exported files")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    paddle.seed(args.seed)
    data = CharData(corpus(), args.context)
    model = GPT(data.vocab_size, args.context, args.width, args.layers, args.heads)
    scope = paddle.Scope()
    train(args, data, model, scope)
    export(model, data, args.out, scope)
    print(f"exported {args.out}.pdmodel and {args.out}_step.pdmodel (one cached decoding step)")

    generator = Generator(args.out)
    started = time.perf_counter()
    text = generator.generate(args.prompt, args.generate)
    per_char = (time.perf_counter() - started) / (len(args.prompt) + args.generate)
    print(f"greedy ({per_char * 1e3:.2f} ms per character):\n{text}\n")
    text = generator.generate(args.prompt, args.generate, np.random.default_rng(args.seed),
                              top_k=20, top_p=0.9, temperature=0.8)
    print(f"sampled (top-k 20, top-p 0.9, temperature 0.8):\n{text}")


if __name__ == "__main__":
    main()
