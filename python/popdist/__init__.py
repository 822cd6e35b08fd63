"""PopDist's API (``import popdist``) over Tessera: tessera.distributed, for
scripts started by tessera-launch (or its ``poprun`` name). A real PopDist
earlier on the path comes first."""
from tessera.distributed import (  # noqa: F401
    execute_on_instances, finalizeBackend, getDeviceId, getInstanceIndex, getNumInstances,
    getNumIpusPerReplica, getNumLocalReplicas, getNumTotalReplicas, getReplicaIndexOffset, init,
    isPopdistEnvSet)

from . import poptorch  # noqa: F401,E402
