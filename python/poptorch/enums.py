"""PopTorch's enums (poptorch.enums): Tessera's, with PopTorch's values."""
from tessera.enums import *  # noqa: F401,F403
from tessera.enums import __all__  # noqa: F401
