"""A PaddlePaddle-documentation-style CNN, written with paddle.nn.functional and trained
eagerly: the same file runs in PaddlePaddle with its first import line changed to
`import paddle`. Synthetic data (each class brightens its own quadrant), so it needs no
download.

    python examples/paddle_functional_cnn.py
"""
import keel as paddle  # import paddle
import argparse

import numpy as np

nn = paddle.nn
F = paddle.nn.functional


class LeNet(nn.Layer):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2D(1, 6, 3, stride=1, padding=1)
        self.conv2 = nn.Conv2D(6, 16, 3)
        self.bn = nn.BatchNorm2D(16)
        self.fc1 = nn.Linear(16 * 3 * 3, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, kernel_size=2, stride=2)
        x = F.relu(self.bn(self.conv2(x)))
        x = F.avg_pool2d(x, kernel_size=2, stride=2)
        x = paddle.flatten(x, start_axis=1)
        x = F.dropout(F.relu(self.fc1(x)), p=0.1, training=self.training)
        return self.fc2(x)


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    images = rng.normal(0.0, 0.3, (n, 1, 16, 16)).astype("float32")
    for i, c in enumerate(labels):
        r, col = divmod(int(c), 2)
        images[i, 0, r * 8:(r + 1) * 8, col * 8:(col + 1) * 8] += 1.0
    return images, labels.astype("int64")


def main():
    paddle.seed(0)
    model = LeNet()
    optimizer = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    images, labels = make_data(256, 0)
    model.train()
    for epoch in range(3):
        for start in range(0, len(images), 32):
            x = paddle.to_tensor(images[start:start + 32])
            y = paddle.to_tensor(labels[start:start + 32])
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=0.05)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
        print(f"epoch {epoch} loss {float(loss):.4f}")
    model.eval()
    test_x, test_y = make_data(128, 1)
    with paddle.no_grad():
        probs = F.softmax(model(paddle.to_tensor(test_x)), axis=-1)
    accuracy = float((probs.numpy().argmax(-1) == test_y).mean())
    print(f"test accuracy {accuracy:.4f}")
    return accuracy


if __name__ == "__main__":
    argparse.ArgumentParser(description="Train a small functional CNN eagerly on synthetic data.").parse_args()
    main()
