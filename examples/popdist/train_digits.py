#!/usr/bin/python3
"""A PopTorch + PopDist training script, as Graphcore's examples write them,
run by Tessera unchanged: one process, or instances of tessera-launch.

    /usr/bin/python3 examples/popdist/train_digits.py --replicas 4
    build/bin/tessera-launch --num-instances 2 --num-replicas 4 \\
        /usr/bin/python3 examples/popdist/train_digits.py

Both train scikit-learn's 8x8 digits with a small CNN to the same weights
(instance 0 writes them to digits_weights.pt) and print the accuracy on the
held-out digits.
"""
import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits

import popdist
import popdist.poptorch
import poptorch


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten())
        self.head = torch.nn.Linear(32 * 4 * 4, 10)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, labels=None):
        logits = self.head(self.features(x))
        if labels is None:
            return logits
        return logits, self.loss(logits, labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=1,
                        help="replicas in one process (a launch takes tessera-launch's)")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)  # the same weights and shuffle on every instance

    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    labels = torch.tensor(digits.target)
    train = torch.utils.data.TensorDataset(images[:1536], labels[:1536])

    if popdist.isPopdistEnvSet():
        popdist.init()
        opts = popdist.poptorch.Options()
    else:
        opts = poptorch.Options().replicationFactor(args.replicas)
    opts.deviceIterations(2)
    model = Classifier()
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    training = poptorch.trainingModel(model, opts, optimizer)
    loader = poptorch.DataLoader(opts, train, batch_size=8, shuffle=True)
    for epoch in range(args.epochs):
        losses = [float(training(x, y)[1].mean()) for x, y in loader]
        if popdist.getInstanceIndex() == 0:
            print(f"epoch {epoch + 1}: mean loss {np.mean(losses):.4f} "
                  f"({len(loader)} steps of {loader.combinedBatchSize} samples here)")
    training.copyWeightsToHost()
    popdist.execute_on_instances({0}, torch.save, model.state_dict(), "digits_weights.pt")

    if popdist.getInstanceIndex() == 0:
        model.eval()
        with torch.no_grad():
            predicted = model(images[1536:]).argmax(1)
        accuracy = float((predicted == labels[1536:]).float().mean())
        print(f"held-out accuracy: {accuracy:.3f} on {len(predicted)} digits")


if __name__ == "__main__":
    main()
