"""tessera-launch and PopDist's API from Python, as PopRun users run them.

A PopTorch-style script (popdist.poptorch.Options, poptorch.DataLoader,
dropout, execute_on_instances) launched as 2 instances x 2 replicas and 4 x 1 trains
to the same weights, bit for bit, as one process with 4 replicas. An
instance killed mid-run stops the others within seconds, with a message
naming it, and leaves a whole checkpoint, from which a resumed launch reaches
the uninterrupted run's weights. An uncaught exception in one instance stops
the launch likewise.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import popdist
import popdist.poptorch
import tessera
from tessera.distributed import InstanceSampler

from conftest import run, tool

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import torch
    import poptorch, popdist, popdist.poptorch

    out, replicas = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
            self.norm = torch.nn.GroupNorm(2, 4)
            self.fc = torch.nn.Linear(64, 10)
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x, y):
            h = torch.nn.functional.max_pool2d(torch.relu(self.norm(self.conv(x))), 2)
            logits = self.fc(torch.nn.functional.dropout(h.flatten(1), 0.1, self.training))
            return logits, self.loss(logits, y)

    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(96, 1, 8, 8, generator=g),
                                          torch.randint(0, 10, (96,), generator=g))
    if popdist.isPopdistEnvSet():
        popdist.init()
        opts = popdist.poptorch.Options()
    else:
        opts = poptorch.Options()
        opts.replicationFactor(replicas)
    opts.Training.gradientAccumulation(2)
    opts.randomSeed(5)
    net = Net()
    model = poptorch.trainingModel(
        net, opts, poptorch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9))
    loader = poptorch.DataLoader(opts, data, batch_size=2, shuffle=True)
    for epoch in range(2):
        for x, y in loader:
            _, loss = model(x, y)
    popdist.execute_on_instances(
        {0}, lambda: np.savez(out, **{k: v.detach().numpy()
                                      for k, v in net.state_dict().items()}))
    print(f"instance {popdist.getInstanceIndex()} of {popdist.getNumInstances()}: "
          f"{popdist.getNumLocalReplicas()} of {popdist.getNumTotalReplicas()} replicas "
          f"from {popdist.getReplicaIndexOffset()}, {len(loader)} batches", flush=True)
""")


def launch(*args, timeout=300, cwd=None):
    return run([tool("tessera-launch"), *map(str, args)], timeout=timeout, cwd=cwd)


def assert_identical(a, b):
    a, b = np.load(a), np.load(b)
    assert sorted(a.keys()) == sorted(b.keys())
    for k in a.keys():
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_python_instances_train_as_one_process(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    one = run([sys.executable, str(script), str(tmp_path / "one.npz"), "4"], timeout=300)
    assert one.returncode == 0, one.stderr
    two = launch("--num-instances", 2, "--num-replicas", 4, sys.executable, script,
                 tmp_path / "two.npz", 0)
    assert two.returncode == 0, two.stderr
    assert "instance 1 of 2: 2 of 4 replicas from 2, 6 batches" in two.stdout
    assert "instance 0 of 2: 2 of 4 replicas from 0, 6 batches" in two.stdout
    assert_identical(tmp_path / "one.npz", tmp_path / "two.npz")
    four = launch("--num-instances", 4, "--num-replicas", 4, "--only-output-from-instance", 3,
                  sys.executable, script, tmp_path / "four.npz", 0)
    assert four.returncode == 0, four.stderr
    assert four.stdout.strip() == "instance 3 of 4: 1 of 4 replicas from 3, 6 batches"
    assert_identical(tmp_path / "one.npz", tmp_path / "four.npz")


def _compile_cnn(tmp_path):
    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            return self.fc(torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1))

    torch.manual_seed(0)
    torch.onnx.export(CNN(), torch.randn(2, 1, 8, 8), tmp_path / "cnn.onnx", input_names=["x"],
                      output_names=["y"], opset_version=17, dynamic_axes={"x": {0: "n"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", x=rng.standard_normal((64, 1, 8, 8)).astype(np.float32),
             labels=rng.integers(0, 10, 64).astype(np.int64))
    result = run([tool("tessera-compile"), str(tmp_path / "cnn.onnx"), "--train", "--loss",
                  "cross-entropy", "--optimizer", "adam:lr=0.001", "--micro-batch-size", "2",
                  "--replicas", "4", "-o", str(tmp_path / "cnn.tess")])
    assert result.returncode == 0, result.stderr


def _instance_pid(index, cwd):
    """The tessera-run process that is instance `index` of the launch in
    `cwd` (other tests' launches may run beside this one)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "tessera-run":
                    continue
            if os.readlink(f"/proc/{pid}/cwd") != os.path.realpath(cwd):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"POPDIST_INSTANCE_INDEX={index}".encode() in env:
            return int(pid)
    return None


def test_killed_instance_stops_the_launch_and_resumes(tmp_path):
    _compile_cnn(tmp_path)
    steps = 20000
    common = [tool("tessera-run"), "cnn.tess", "--train-data", "data.npz", "--steps", steps,
              "--host-threads", 1]
    checkpoint = tmp_path / "ck.npz"
    proc = subprocess.Popen(
        [tool("tessera-launch"), "--num-instances", "2", "--num-replicas", "4",
         *map(str, common), "--checkpoint-every", "50", "--save-weights", "ck.npz"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert checkpoint.exists(), "no checkpoint was written"
        time.sleep(0.3)
        victim = _instance_pid(1, tmp_path)
        assert victim is not None and proc.poll() is None
        os.kill(victim, signal.SIGKILL)
        killed = time.time()
        _, stderr = proc.communicate(timeout=30)
        stopped = time.time() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert stopped < 10, f"the other instance took {stopped:.1f} s to stop"
    assert "tessera-launch: error: instance 1 (on" in stderr
    assert "was killed by signal 9 (Killed); the other instances were stopped" in stderr
    assert _instance_pid(0, tmp_path) is None
    # The checkpoint is whole (written atomically), and says how far it got.
    done = int(np.load(checkpoint)["checkpoint.runs_done"])
    assert done > 0 and done % 50 == 0 and done < steps
    assert not [p for p in os.listdir(tmp_path) if p.startswith("ck.npz.")]
    # Resumed, it reaches what an uninterrupted run of as many steps reaches.
    total = done + 100
    common[common.index("--steps") + 1] = total
    resumed = launch("--num-instances", 2, "--num-replicas", 4, *common, "--resume", "ck.npz",
                     "--save-weights", "resumed.npz", cwd=tmp_path, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming after run {done} from ck.npz" in resumed.stdout
    whole = run([tool("tessera-run"), *map(str, common[1:]), "--save-weights", "whole.npz"],
                cwd=tmp_path, timeout=600)
    assert whole.returncode == 0, whole.stderr
    resumed_weights = np.load(tmp_path / "resumed.npz")
    whole_weights = np.load(tmp_path / "whole.npz")
    for k in whole_weights.keys():
        np.testing.assert_array_equal(resumed_weights[k], whole_weights[k], err_msg=k)


def test_an_exception_in_one_instance_stops_the_others(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(SCRIPT.replace(
        "        _, loss = model(x, y)\n",
        "        _, loss = model(x, y)\n"
        "        if popdist.getInstanceIndex() == 1:\n"
        "            raise RuntimeError('instance 1 gives up')\n"))
    assert "gives up" in script.read_text()
    start = time.time()
    result = launch("--num-instances", 2, "--num-replicas", 4, sys.executable, script,
                    tmp_path / "w.npz", 0, timeout=120)
    assert result.returncode != 0
    assert "RuntimeError: instance 1 gives up" in result.stderr
    assert "tessera-launch: error: instance 1 failed" in result.stderr
    assert time.time() - start < 60
    assert not (tmp_path / "w.npz").exists()


def test_popdist_api_outside_a_launch(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("POPDIST_", "OMPI_COMM_WORLD_")):
            monkeypatch.delenv(name)
    assert not popdist.isPopdistEnvSet()
    assert (popdist.getNumInstances(), popdist.getInstanceIndex(), popdist.getNumTotalReplicas(),
            popdist.getNumLocalReplicas(), popdist.getReplicaIndexOffset()) == (1, 0, 1, 1, 0)
    assert popdist.execute_on_instances({0}, lambda: 7) == 7
    assert popdist.execute_on_instances({1}, lambda: 7) is None
    opts = popdist.poptorch.Options()
    assert (opts.replication_factor, opts.Distributed.numProcesses) == (1, 1)


def test_popdist_environment(monkeypatch):
    for key, value in {"POPDIST_NUM_INSTANCES": "4", "POPDIST_INSTANCE_INDEX": "2",
                       "POPDIST_NUM_TOTAL_REPLICAS": "8", "POPDIST_NUM_LOCAL_REPLICAS": "2",
                       "POPDIST_REPLICA_INDEX_OFFSET": "4",
                       "POPDIST_NUM_IPUS_PER_REPLICA": "1"}.items():
        monkeypatch.setenv(key, value)
    assert popdist.isPopdistEnvSet()
    assert (popdist.getNumInstances(), popdist.getInstanceIndex(), popdist.getNumTotalReplicas(),
            popdist.getNumLocalReplicas(), popdist.getReplicaIndexOffset()) == (4, 2, 8, 2, 4)
    popdist.init()
    opts = popdist.poptorch.Options()
    assert (opts.replication_factor, opts.Distributed.processId,
            opts.Distributed.numProcesses) == (2, 2, 4)
    # The program all-reduces over every instance's replicas.
    assert opts._compile_options(True)["replicas"] == 8
    copy = tessera.Options().fromDict(opts.toDict())
    assert (copy.Distributed.processId, copy.Distributed.numProcesses) == (2, 4)
    monkeypatch.setenv("POPDIST_REPLICA_INDEX_OFFSET", "5")
    with pytest.raises(tessera.Error, match="does not add up"):
        popdist.init()


def test_distributed_options_errors():
    opts = tessera.Options()
    with pytest.raises(tessera.Error, match=r"process_id 3 is not in \[0, 2\)"):
        opts.Distributed.configureProcessId(3, 2)
    with pytest.raises(tessera.Error, match="num_processes"):
        opts.Distributed.configureProcessId(0, 0)
    assert opts.Distributed.disable().numProcesses == 1


def test_instance_sampler_splits_every_batch_by_replica():
    # 2 instances x 2 replicas, micro-batch 3, 2 iterations: each global batch
    # of 24 rows is [iteration][replica][row].
    order = list(range(50))
    shards = [list(InstanceSampler(order, 3, 2, 4, 2 * i, 2)) for i in range(2)]
    assert [len(s) for s in shards] == [2, 2]  # 50 // 24 batches, the rest dropped
    for batch in range(2):
        rows = order[24 * batch:24 * (batch + 1)]
        mine0 = [r for j, r in enumerate(rows) if (j // 3) % 4 < 2]
        mine1 = [r for j, r in enumerate(rows) if (j // 3) % 4 >= 2]
        assert shards[0][batch] == mine0 and shards[1][batch] == mine1
    assert len(InstanceSampler(order, 3, 2, 4, 0, 2, drop_last=False)) == 3


def test_instances_that_start_apart_are_refused(tmp_path):
    # Instance 1 alone with another seed would draw apart. (Another learning
    # rate compiles into another executable: refused as such.)
    script = tmp_path / "apart.py"
    script.write_text(SCRIPT.replace("opts.randomSeed(5)",
                                     "opts.randomSeed(5 + popdist.getInstanceIndex())"))
    result = launch("--num-instances", 2, "--num-replicas", 4, sys.executable, script,
                    tmp_path / "w.npz", 0, timeout=120)
    assert result.returncode != 0
    assert ("instance 1's starting state or options (weights, optimizer state, learning rate, "
            "seed, or the run's own options) differs from instance 0's") in result.stderr
    assert "tessera-launch: error: instance" in result.stderr


def test_the_popdist_example_trains_as_one_process(tmp_path):
    # examples/popdist/train_digits.py, as docs/tessera-launch.md runs it.
    example = os.path.join(os.environ["TESSERA_SOURCE_DIR"], "examples", "popdist",
                           "train_digits.py")
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = run([sys.executable, example, "--replicas", "4", "--epochs", "1"], cwd=tmp_path / "one",
              timeout=600)
    assert one.returncode == 0, one.stderr
    two = launch("--num-instances", 2, "--num-replicas", 4, sys.executable, example,
                 "--epochs", 1, cwd=tmp_path / "two", timeout=600)
    assert two.returncode == 0, two.stderr
    assert "(24 steps of 32 samples here)" in two.stdout
    assert "held-out accuracy" in two.stdout
    a = torch.load(tmp_path / "one" / "digits_weights.pt")
    b = torch.load(tmp_path / "two" / "digits_weights.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
