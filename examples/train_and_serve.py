"""One model definition for training and inference: a Layer class, trained with the
high-level `Model.fit`, exported with `jit.save`, served by the Predictor with no model code.

    python -m pip install -e ".[examples]" && python examples/train_and_serve.py

Written as PaddlePaddle's documentation writes it (class Net(nn.Layer), paddle.Model,
prepare/fit/evaluate, save for inference, paddle.inference's Config and create_predictor);
only the imports differ. The digits are scikit-learn's (8x8 images, no download).
"""
from __future__ import annotations

import argparse

import numpy as np

import program as paddle
from executor import Config, create_predictor
from hapi import Model, metrics
from program import nn
from program.static import InputSpec


class Net(nn.Layer):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2D(1, 16, 3, padding=1), nn.BatchNorm2D(16), nn.ReLU(),
            nn.Conv2D(16, 32, 3, padding=1), nn.BatchNorm2D(32), nn.ReLU(), nn.MaxPool2D(2, 2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.2),
                                        nn.Linear(64, num_classes))

    def forward(self, image):
        return self.classifier(self.features(image))


def datasets():
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = ((digits.images / 16.0 - 0.3) / 0.4).astype(np.float32)[:, None]   # [N, 1, 8, 8]
    labels = digits.target.astype(np.int64)[:, None]
    order = np.random.default_rng(2024).permutation(len(images))
    images, labels = images[order], labels[order]
    n_test = len(images) // 5
    return (paddle.io.TensorDataset([images[n_test:], labels[n_test:]]),
            paddle.io.TensorDataset([images[:n_test], labels[:n_test]]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--out", default="out/digits_net", help="prefix of the exported .pdmodel/.pdiparams")
    args = parser.parse_args(argv)

    paddle.seed(2024)
    train_set, test_set = datasets()
    model = Model(Net(), inputs=[InputSpec([None, 1, 8, 8], "float32", "image")],
                  labels=[InputSpec([None, 1], "int64", "label")])
    model.prepare(paddle.optimizer.Adam(learning_rate=2e-3, parameters=model.parameters()),
                  nn.CrossEntropyLoss(), metrics.Accuracy())
    model.fit(train_set, test_set, epochs=args.epochs, batch_size=64, verbose=1)
    result = model.evaluate(test_set, batch_size=256, verbose=0)
    model.save(args.out, training=False)                  # jit.save: .pdmodel + .pdiparams

    # serving: the files alone, no model code
    predictor = create_predictor(Config(args.out + ".pdmodel", args.out + ".pdiparams"))
    images = test_set.tensors[0]
    served, = predictor.run([images])
    expected = np.concatenate(model.predict(test_set, batch_size=256, verbose=0)[0])
    assert np.allclose(served, expected, rtol=1e-5, atol=1e-5), "served outputs differ from the model's"
    accuracy = float((served.argmax(1) == test_set.tensors[1][:, 0]).mean())
    print(f"exported {args.out}.pdmodel; served accuracy {accuracy:.4f} (evaluate: {result['acc']:.4f})")


if __name__ == "__main__":
    main()
