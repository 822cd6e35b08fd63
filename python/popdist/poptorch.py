"""popdist.poptorch: the Options of one instance (tessera.distributed.Options)."""
from tessera.distributed import InstanceSampler, Options  # noqa: F401
