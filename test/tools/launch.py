# tessera-launch: instances over OpenMPI train to the same weights, bit for
# bit, as one process running every replica (the all-reduce gathers every
# replica's gradients and adds them in replica order on every instance; each
# instance keeps its replicas' rows of every batch): the digits CNN (Adam)
# at 4 replicas as 2 instances x 2 and 4 instances x 1, and a transformer
# encoder layer (SGD with momentum, gradient accumulation 2, dropout drawn
# per replica) at 4 replicas as 2 x 2. Instance 0 alone writes the weights.
# A checkpoint and --resume reach the uninterrupted run's weights. Errors:
# replicas that do not split, an executable compiled for other replicas,
# instances running different executables or starting apart (a learning
# rate, a number of steps), a failing instance stopping the launch.
# RUN: rm -rf %t && %python %s %t
# RUN: tessera-compile %t/cnn.onnx --train --loss cross-entropy --optimizer adam:lr=0.01 --micro-batch-size 2 --replicas 4 -o %t/cnn4.tess
# RUN: tessera-run %t/cnn4.tess --train-data %t/digits.npz --epochs 2 --save-weights %t/one.npz
# RUN: cd %t && tessera-launch --num-instances 2 --num-replicas 4 --only-output-from-instance 0 tessera-run cnn4.tess --train-data digits.npz --epochs 2 --save-weights two.npz | FileCheck %s --check-prefix=TWO
# RUN: cmp %t/one.npz %t/two.npz
# RUN: cd %t && tessera-launch --num-instances 4 --num-replicas 4 --only-output-from-instance 3 tessera-run cnn4.tess --train-data digits.npz --epochs 2 --save-weights four.npz | FileCheck %s --check-prefix=FOUR
# RUN: cmp %t/one.npz %t/four.npz
#
# The encoder: dropout draws its own numbers on each replica, by its global
# index.
# RUN: tessera-compile %t/encoder.onnx --train --loss mse --optimizer sgd:lr=0.01,momentum=0.9 --micro-batch-size 2 --gradient-accumulation 2 --replicas 4 -o %t/enc4.tess
# RUN: tessera-run %t/enc4.tess --train-data %t/encoder.npz --epochs 2 --seed 7 --save-weights %t/enc-one.npz
# RUN: cd %t && tessera-launch --num-instances 2 --num-replicas 4 tessera-run enc4.tess --train-data encoder.npz --epochs 2 --seed 7 --save-weights enc-two.npz
# RUN: cmp %t/enc-one.npz %t/enc-two.npz
#
# A checkpoint every 3 runs, then resumed from the one after run 6.
# RUN: cd %t && tessera-launch --num-instances 2 --num-replicas 4 tessera-run cnn4.tess --train-data digits.npz --steps 6 --checkpoint-every 3 --save-weights ck.npz
# RUN: cd %t && tessera-launch --num-instances 2 --num-replicas 4 --only-output-from-instance 0 tessera-run cnn4.tess --train-data digits.npz --epochs 2 --resume ck.npz --save-weights resumed.npz | FileCheck %s --check-prefix=RESUME
# RUN: cmp %t/one.npz %t/resumed.npz
#
# RUN: tessera-launch --num-instances 2 --num-replicas 4 --host a,b --dry-run tessera-run x.tess | FileCheck %s --check-prefix=DRY
# A one-replica executable runs whole on each instance; instance 0 alone writes.
# RUN: tessera-compile %t/cnn.onnx --train --loss cross-entropy --optimizer adam:lr=0.01 --micro-batch-size 8 -o %t/cnn1.tess
# RUN: rm -f %t/whole.npz && cd %t && tessera-launch --num-instances 2 --num-replicas 2 sh -c 'exec tessera-run cnn1.tess --train-data digits.npz --steps 2 --save-weights whole.npz' | FileCheck %s --check-prefix=WHOLE
# RUN: tessera-launch --num-instances 4 --num-replicas 8 --host a,b --num-ilds 2 --executable-cache-path cache --print-topology=yes --dry-run --vipu-partition=p8 --reset-partition=no --numa-aware=yes true 2>&1 | FileCheck %s --check-prefix=TOPOLOGY
# RUN: not tessera-launch --num-instances 3 --num-replicas 4 true 2>&1 | FileCheck %s --check-prefix=SPLIT
# RUN: not tessera-launch --num-instances 2 --num-replicas 4 --num-ilds 3 true 2>&1 | FileCheck %s --check-prefix=ILDS
# RUN: not tessera-launch --num-instances 2 --only-output-from-instance 2 true 2>&1 | FileCheck %s --check-prefix=WHICH
# RUN: not tessera-launch --num-instances 2 2>&1 | FileCheck %s --check-prefix=NOCOMMAND
# RUN: cd %t && not tessera-launch --num-instances 2 --num-replicas 2 tessera-run cnn4.tess --train-data digits.npz --steps 1 2>&1 | FileCheck %s --check-prefix=REPLICAS
# RUN: tessera-compile %t/cnn.onnx --train --loss cross-entropy --optimizer sgd:lr=0.01 --micro-batch-size 2 --replicas 4 -o %t/sgd4.tess
# RUN: cd %t && not tessera-launch --num-instances 2 --num-replicas 4 sh -c 'exec tessera-run $(test $POPDIST_INSTANCE_INDEX = 0 && echo cnn4 || echo sgd4).tess --train-data digits.npz --steps 1' 2>&1 | FileCheck %s --check-prefix=DIFFER
# RUN: cd %t && not tessera-launch --num-instances 2 --num-replicas 4 sh -c 'exec tessera-run cnn4.tess --train-data $(test $POPDIST_INSTANCE_INDEX = 0 && echo digits || echo missing).npz --steps 1' 2>&1 | FileCheck %s --check-prefix=FAILS
# RUN: cd %t && not tessera-launch --num-instances 2 --num-replicas 4 sh -c 'exec tessera-run cnn4.tess --train-data digits.npz --steps 1 --lr $(test $POPDIST_INSTANCE_INDEX = 0 && echo 0.01 || echo 0.02)' 2>&1 | FileCheck %s --check-prefix=APART
# RUN: cd %t && not tessera-launch --num-instances 2 --num-replicas 4 sh -c 'exec tessera-run cnn4.tess --train-data digits.npz --steps $((POPDIST_INSTANCE_INDEX + 1))' 2>&1 | FileCheck %s --check-prefix=APART
#
# TWO: training adam on 128 samples (64 here): micro-batch 2 x gradient accumulation 1 x device iterations 1 x replicas 2 (replicas 0 to 1 of 4: instance 0 of 2) = 4 samples per run, 32 runs (32 weight updates of 8 samples)
# TWO: weights written to two.npz
# FOUR: replicas 3 to 3 of 4: instance 3 of 4
# FOUR-NOT: instance 0 of 4
# RESUME: resuming after run 6 from ck.npz
# RESUME-NOT: run 6/32
# RESUME: run 7/32
# DRY: mpirun {{.*}}-np 1 --host a -x POPDIST_NUM_INSTANCES=2 -x POPDIST_INSTANCE_INDEX=0 -x POPDIST_NUM_TOTAL_REPLICAS=4 -x POPDIST_NUM_LOCAL_REPLICAS=2 -x POPDIST_REPLICA_INDEX_OFFSET=0 -x POPDIST_NUM_IPUS_PER_REPLICA=1 tessera-run x.tess : -np 1 --host b {{.*}}POPDIST_INSTANCE_INDEX=1 {{.*}}POPDIST_REPLICA_INDEX_OFFSET=2 {{.*}}tessera-run x.tess
# TOPOLOGY: note: --vipu-partition, --reset-partition, --numa-aware choose(s) IPU partitions; every instance runs on its own IPU model
# TOPOLOGY: instance  host         replicas
# TOPOLOGY-NEXT:        0  a            0 to 1
# TOPOLOGY-NEXT:        1  a            2 to 3
# TOPOLOGY-NEXT:        2  b            4 to 5
# TOPOLOGY-NEXT:        3  b            6 to 7
# TOPOLOGY: -x POPDIST_NUM_IPUS_PER_REPLICA=1 -x TESSERA_CACHE_DIR={{/.*}}/cache true :
# WHOLE: weights written to whole.npz
# WHOLE-NOT: weights written
# SPLIT: tessera-launch: error: --num-replicas 4 is not a multiple of --num-instances 3
# ILDS: --num-ilds 3: the replicas (4) and instances (2) must split evenly over the IPU-Link domains
# WHICH: --only-output-from-instance 2 is not an instance (0 to 1)
# NOCOMMAND: no command to run
# REPLICAS: the executable was compiled for 4 replica(s) but tessera-launch runs 2 (--num-replicas): compile it with --replicas 2
# REPLICAS: tessera-launch: error: instance {{[01]}}
# DIFFER: instance 1's executable (its program, code, weights and replicas per instance) differs from instance 0's
# DIFFER: tessera-launch: error: instance {{[01]}} failed
# APART: instance 1's starting state or options (weights, optimizer state, learning rate, seed, or the run's own options) differs from instance 0's
# FAILS: missing.npz
# FAILS: tessera-launch: error: instance 1

import os
import sys
import warnings

import numpy as np
import torch
from sklearn.datasets import load_digits

out = sys.argv[1]
path = lambda name: os.path.join(out, name)  # noqa: E731
warnings.filterwarnings("ignore")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
training = torch.onnx.TrainingMode.TRAINING


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


torch.onnx.export(CNN(), torch.randn(2, 1, 8, 8), path("cnn.onnx"), input_names=["x"],
                  output_names=["y"], opset_version=17, dynamic_axes={"x": {0: "n"}},
                  training=training, do_constant_folding=False)
layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
torch.onnx.export(layer.train(), torch.randn(2, 4, 16), path("encoder.onnx"),
                  input_names=["x"], output_names=["y"], opset_version=17,
                  dynamic_axes={"x": {0: "n"}}, training=training, do_constant_folding=False)
digits = load_digits()
np.savez(path("digits.npz"),
         x=(digits.images[:128] / 16.0).astype(np.float32).reshape(128, 1, 8, 8),
         labels=digits.target[:128].astype(np.int64))
rng = np.random.default_rng(0)
np.savez(path("encoder.npz"), x=rng.standard_normal((32, 4, 16)).astype(np.float32),
         labels=rng.standard_normal((32, 4, 16)).astype(np.float32))
