"""PopDist's API over tessera-launch (also importable as ``popdist`` and
``popdist.poptorch``).

tessera-launch (PopRun's command line) starts one process per instance and
tells each, through PopDist's environment variables, where it stands: its
index, the replicas in all and its own. A script asks here::

    import popdist, popdist.poptorch
    popdist.init()
    opts = popdist.poptorch.Options()      # this instance's replicas
    model = poptorch.trainingModel(net, opts, optimizer)
    popdist.execute_on_instances({0}, save_checkpoint, model)

Outside a launch every function answers as for one instance of one process
running every replica.
"""

import os
import sys
import warnings

import torch

import _tessera

from ._errors import Error
from .options import Options as _Options

__all__ = [
    "init", "isPopdistEnvSet", "getNumInstances", "getInstanceIndex", "getNumTotalReplicas",
    "getNumLocalReplicas", "getReplicaIndexOffset", "getNumIpusPerReplica", "getDeviceId",
    "execute_on_instances", "finalizeBackend", "Options", "InstanceSampler",
]


def _variable(name, default):
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise Error(f"{name}={text!r} is not a whole number (tessera-launch sets it; start "
                    "instances through tessera-launch)") from None


def isPopdistEnvSet():
    """Whether this process was started by tessera-launch (or PopRun)."""
    return "POPDIST_NUM_TOTAL_REPLICAS" in os.environ and "POPDIST_NUM_INSTANCES" in os.environ


def getNumInstances():
    return _variable("POPDIST_NUM_INSTANCES", 1)


def getInstanceIndex():
    return _variable("POPDIST_INSTANCE_INDEX", _variable("OMPI_COMM_WORLD_RANK", 0))


def getNumTotalReplicas():
    return _variable("POPDIST_NUM_TOTAL_REPLICAS", getNumInstances())


def getNumLocalReplicas():
    return _variable("POPDIST_NUM_LOCAL_REPLICAS", getNumTotalReplicas() // getNumInstances())


def getReplicaIndexOffset():
    return _variable("POPDIST_REPLICA_INDEX_OFFSET", getInstanceIndex() * getNumLocalReplicas())


def getNumIpusPerReplica():
    return _variable("POPDIST_NUM_IPUS_PER_REPLICA", 1)


def getDeviceId():
    """The device this instance runs on: its own IPU model, numbered by the
    instance (PopDist's is the V-IPU partition's device)."""
    return getInstanceIndex()


def init(*_args, **_kwargs):
    """Checks the launcher's environment (PopDist's init also starts
    Horovod's backend, which Tessera's collectives do not need)."""
    if not isPopdistEnvSet():
        return
    instances, index = getNumInstances(), getInstanceIndex()
    total, local, offset = getNumTotalReplicas(), getNumLocalReplicas(), getReplicaIndexOffset()
    if not (0 <= index < instances) or local * instances != total or offset != index * local:
        raise Error(f"the launcher's environment does not add up: instance {index} of "
                    f"{instances}, {local} of {total} replicas from {offset} (start "
                    "instances through tessera-launch)")
    _guard()


def finalizeBackend():
    """PopDist's; nothing to finish here (MPI finishes at exit)."""


def execute_on_instances(instances, function, *args, **kwargs):
    """Calls function(*args, **kwargs) on the instances in `instances` (a
    set of indices) only, returning its result there and None elsewhere:
    instance 0 writing a checkpoint, say."""
    if getInstanceIndex() in set(instances):
        return function(*args, **kwargs)
    return None


class Options(_Options):
    """tessera.Options (PopTorch's) for this instance: replicationFactor is
    its own replicas, Distributed its place among the instances; the program
    all-reduces over every instance's replicas."""

    def __init__(self, ipus_per_replica=None, **kwargs):
        super().__init__(**kwargs)
        if ipus_per_replica is not None and isPopdistEnvSet() and \
                ipus_per_replica != getNumIpusPerReplica():
            warnings.warn(f"ipus_per_replica={ipus_per_replica} but the launcher gave "
                          f"--ipus-per-replica {getNumIpusPerReplica()}: the model's own "
                          "stages decide the IPUs each replica uses", stacklevel=2)
        self.replicationFactor(getNumLocalReplicas())
        self.Distributed.configureProcessId(getInstanceIndex(), getNumInstances())


class InstanceSampler(torch.utils.data.Sampler):
    """The batches of one instance: for each combined batch of the whole
    launch (every instance's replicas, in the order `sampler` gives the data
    set), the indices of this instance's replicas' rows. Every instance
    therefore trains on the same global order as one process running every
    replica. `sampler` must give the same order on every instance (a fixed
    seed when shuffling)."""

    def __init__(self, sampler, micro_batch, iterations, total_replicas, first_replica,
                 local_replicas, drop_last=True):
        self.sampler = sampler
        self.micro_batch, self.iterations = micro_batch, iterations
        self.total, self.first, self.local = total_replicas, first_replica, local_replicas
        self.drop_last = drop_last
        self.global_batch = micro_batch * iterations * total_replicas

    def _mine(self, batch):
        kept = []
        for row, index in enumerate(batch):
            replica = (row // self.micro_batch) % self.total
            if self.first <= replica < self.first + self.local:
                kept.append(index)
        return kept

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.global_batch:
                yield self._mine(batch)
                batch = []
        if batch and not self.drop_last:
            yield self._mine(batch)

    def __len__(self):
        n = len(self.sampler)
        return n // self.global_batch if self.drop_last else -(-n // self.global_batch)


_guarded = False


def _guard():
    """An uncaught exception in one instance stops every instance (the others
    may wait for it in a collective), after Python has printed it."""
    global _guarded
    if _guarded or getNumInstances() <= 1:
        return
    _guarded = True
    previous = sys.excepthook

    def stop_the_launch(kind, value, traceback):
        previous(kind, value, traceback)
        sys.stderr.flush()
        _tessera.abort_instances(1)

    sys.excepthook = stop_the_launch
