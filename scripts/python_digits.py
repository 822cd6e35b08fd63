#!/usr/bin/python3
"""Fine-tunes a small CNN on scikit-learn's 8x8 digits from Python, the
PopTorch way, on the IPU model; prints accuracy on held-out digits.

    scripts/python_digits.py [--epochs 6] [--min-accuracy 0.9]

Exits 1 if the held-out accuracy is below --min-accuracy (the test suite
runs it). Nothing is downloaded: the digits ship with Debian's
python3-sklearn.
"""
import argparse
import sys
import time

import torch
from sklearn.datasets import load_digits

import tessera


class DigitsCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x, labels=None):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        logits = self.fc(x.flatten(1))
        if labels is None:
            return logits
        return logits, torch.nn.functional.cross_entropy(logits, labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--min-accuracy", type=float, default=0.0)
    args = parser.parse_args()
    start = time.time()

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(y), generator=g)
    train, test = order[:1440], order[1440:]

    torch.manual_seed(0)
    net = DigitsCNN()
    opts = tessera.Options().deviceIterations(5)
    opts.Training.gradientAccumulation(2)
    optimizer = tessera.optim.Adam(net.parameters(), lr=0.005)
    model = tessera.trainingModel(net, opts, optimizer)
    loader = tessera.DataLoader(opts, torch.utils.data.TensorDataset(x[train], y[train]),
                                batch_size=16, shuffle=True,
                                generator=torch.Generator().manual_seed(1))
    print(f"training on {len(train)} digits: {loader.combinedBatchSize} samples per call "
          "(batch 16 x gradient accumulation 2 x device iterations 5)")
    for epoch in range(args.epochs):
        losses = []
        for images, labels in loader:
            _, loss = model(images, labels)
            losses.append(float(loss))
        print(f"epoch {epoch + 1}: loss {sum(losses) / len(losses):.4f}")

    # Inference on the held-out digits with the trained weights (the
    # inference model takes them from the training model).
    net.eval()
    classify = tessera.inferenceModel(net, tessera.Options())
    predictions = classify(x[test]).argmax(1)
    accuracy = float((predictions == y[test]).float().mean())
    print(f"test accuracy on {len(test)} held-out digits: {accuracy:.3f} "
          f"(whole run {time.time() - start:.1f} s)")
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
