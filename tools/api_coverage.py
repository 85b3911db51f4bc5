"""Print how much of PaddlePaddle 3.3.1's Python API Keel has, per namespace.

The markdown table of docs/compatibility.md (tests/test_api_coverage.py checks that the page
holds what this prints now):

    python -m keel.tools.api_coverage

The public names are PaddlePaddle's own `__all__` of each namespace, recorded with
PaddlePaddle installed (tests/fixtures/paddle_api/record.py); `paddle.X.name` counts when
`keel.X.name` exists. The zoo column counts the names that PaddleClas, PaddleSeg and
PaddleDetection's code reaches."""
from __future__ import annotations

import argparse
import json
import pkgutil
import sys
from pathlib import Path

import keel

FIXTURE_FILE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "paddle_api" / "paddle_3.3.1.json"

# What each namespace lacks, and why (the namespaces Keel covers whole need no line).
NOT_THERE = {
    "paddle": "in-place variants (`abs_`, `add_`, ...: write `x = paddle.abs(x)`), complex and "
              "bit-level tensor functions not yet written, typed tensor classes (`FloatTensor`, ...), "
              "`Generator`, `LazyGuard`, memory-mapped storage",
    "paddle.amp": "the autocast state queries (`is_autocast_enabled`, `get_autocast_*dtype`)",
    "paddle.audio": "audio features and datasets: out of Keel's scope",
    "paddle.autograd": "`PyLayer`/`Function` (custom Python gradients), `jacobian`/`hessian`, saved-tensor "
                       "hooks: eager gradients come from the op registry's rules only (`paddle.grad` is there)",
    "paddle.callbacks": "`VisualDL`, `WandbCallback` (external loggers), `ReduceLROnPlateau`",
    "paddle.device": "XPU, NPU, IPU and custom-device APIs, streams and events: Keel runs on a CPU or on "
                     "CUDA through cupy",
    "paddle.device.cuda": "streams, events, device properties and peak-memory statistics",
    "paddle.distributed": "auto-parallel (`shard_tensor`, `ProcessMesh`, `dtensor_from_fn`, ...), "
                          "pipeline/tensor/sharding parallelism, parameter servers, `spawn`, "
                          "point-to-point and object collectives: Keel trains data-parallel only",
    "paddle.distributed.fleet": "the role makers, hybrid-parallel topology and parameter-server data "
                                "generators: Keel's fleet is `init`, `distributed_optimizer` and the rank queries",
    "paddle.distribution": "probability distributions: not yet written",
    "paddle.fft": "FFTs: no fft ops",
    "paddle.geometric": "graph message passing and sampling: no segment/graph ops",
    "paddle.hub": "loading models from a hub needs the network",
    "paddle.incubate": "segment and graph ops, fused softmax-mask kernels, `LookAhead`, `ModelAverage` "
                       "(Keel has `incubate.optimizer`'s recompute and gradient merge)",
    "paddle.inference": "`_get_phi_kernel_name` (a private name)",
    "paddle.io": "`ChainDataset`, `ComposeDataset`, `ConcatDataset`, `random_split`, `Subset`, "
                 "`get_worker_info` (the DataLoader has no worker processes)",
    "paddle.jit": "`enable_to_static`, `ignore_module`, `set_code_level`, `set_verbosity`: dy2static is "
                  "neither switchable nor logged",
    "paddle.linalg": "decompositions and functions beyond norm, inv, det, solve, svd, qr, cholesky, eigh "
                     "(`lu`, `eig`, `pinv`, `matrix_power`, `lstsq`, ...): not yet written",
    "paddle.nn": "the RNN cells and decoders, `Fold`, `LPPool`, fractional pools, `RReLU`, "
                 "`AlphaDropout`, spectral/weight norm and a few losses (see below)",
    "paddle.nn.functional": "see the list below: ops Keel lacks, GPU-only fused attention, in-place forms",
    "paddle.nn.initializer": "`Bilinear`, `Orthogonal`, `set_global_initializer`",
    "paddle.nn.utils": "`weight_norm`, `spectral_norm`, `remove_weight_norm` (reparametrization hooks)",
    "paddle.onnx": "`export` comes with the ONNX exporter (`keel.program.onnx`)",
    "paddle.optimizer": "`Adadelta`, `Adamax`, `ASGD`, `LBFGS`, `NAdam`, `RAdam`, `Rprop`: not yet written",
    "paddle.optimizer.lr": "`CosineAnnealingWarmRestarts`, `LinearLR`, `MultiplicativeDecay`: not yet written",
    "paddle.profiler": "PaddlePaddle's profiler API; Keel's is `keel.executor.Profiler` and `keel-profile`",
    "paddle.quantization": "quantization-aware training and post-training quantization: no int8 path",
    "paddle.signal": "`stft`/`istft`: no fft ops",
    "paddle.sparse": "sparse tensors: Keel's tensors are dense",
    "paddle.static": "IPU/XPU names, `ExponentialMovingAverage`, `WeightNormParamAttr`, `Print`, `py_func` "
                     "(Python in a program), `auc`, `(de)serialize_persistables`",
    "paddle.static.nn": "the sequence (LoD) layers, `nce`, `row_conv`, `spectral_norm`, "
                        "`bilinear_tensor_product`, `sparse_embedding`, `py_func`, `static_pylayer`",
    "paddle.text": "text datasets (they download) and `viterbi_decode`",
    "paddle.utils": "`deprecated`, `require_version`, and `try_import`: Keel's shipped code imports no "
                    "module by a name given at run time",
    "paddle.vision": "image backends (`set_image_backend`, `image_load`: Keel's transforms take numpy arrays)",
    "paddle.vision.datasets": "datasets that download (MNIST, Cifar, ...): no network",
    "paddle.vision.models": "the model zoo's classes: Keel runs their exported files (41 in tests/fixtures/zoo)",
    "paddle.vision.ops": "`nms`, `psroi_pool`, `yolo_loss`, `decode_jpeg`, `read_file`, the layer classes "
                         "(`RoIAlign`, ...); `deform_conv2d` is `static.nn`'s",
    "paddle.vision.transforms": "`RandomAffine`, `RandomErasing`, `RandomPerspective` and their functions",
}


def load_fixture() -> dict:
    return json.loads(FIXTURE_FILE.read_text())


def resolve(namespace: str, name: str):
    """`keel.<namespace without paddle>.<name>`, or None when Keel lacks it. A submodule
    counts whether or not something imported it before (`paddle.distributed.launch`): it is
    looked for among the package's files, not imported."""
    module = keel
    for part in namespace.split(".")[1:]:
        module = getattr(module, part, None)
        if module is None:
            return None
    found = getattr(module, name, None)
    if found is None and name in _submodule_names(module):
        return f"{module.__name__}.{name}"
    return found


def _submodule_names(module) -> set[str]:
    path = getattr(module, "__path__", None)
    return {info.name for info in pkgutil.iter_modules(path)} if path is not None else set()


def coverage(fixture: dict) -> list[tuple[str, int, int, int, int]]:
    """(namespace, names Keel has, public names, zoo names Keel has, zoo names) per namespace."""
    rows = []
    for namespace, public in sorted(fixture["namespaces"].items()):
        used = fixture["used_by_zoo"].get(namespace, {})
        rows.append((namespace, sum(resolve(namespace, n) is not None for n in public), len(public),
                     sum(resolve(namespace, n) is not None for n in used), len(used)))
    return rows


def overall_percent(rows) -> int:
    return round(100 * sum(r[1] for r in rows) / sum(r[2] for r in rows))


def markdown_table(rows) -> str:
    lines = ["| namespace | public names in Keel | names the zoos use, in Keel | what is not there, and why |",
             "| --- | --- | --- | --- |"]
    for namespace, have, total, used_have, used in rows:
        zoo = f"{used_have} / {used}" if used else "-"
        why = NOT_THERE.get(namespace, "") if have < total else ""
        lines.append(f"| `{namespace}` | {have} / {total} ({100 * have // total}%) | {zoo} | {why} |")
    have, total = sum(r[1] for r in rows), sum(r[2] for r in rows)
    lines.append(f"| all | {have} / {total} ({overall_percent(rows)}%) | "
                 f"{sum(r[3] for r in rows)} / {sum(r[4] for r in rows)} | |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)  # (no options: --help only)
    if not FIXTURE_FILE.exists():
        print(f"api_coverage: {FIXTURE_FILE} is not here: run it in a Keel checkout (the recorded API is a "
              f"test fixture, not installed)", file=sys.stderr)
        return 2
    print(markdown_table(coverage(load_fixture())), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
