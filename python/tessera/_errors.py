"""The one exception type of the package."""
from _tessera import Error

# PopTorch's error attributes: the message alone, its kind, where it was
# raised (a Tessera error's message names the place itself).
Error.message = property(lambda self: str(self.args[0]) if self.args else "")
Error.type = "tessera_error"
Error.location = ""


def not_available(what, feature):
    """Raises the error for an option whose implementation has not landed."""
    raise Error(f"{what} is not available yet in Tessera ({feature} is not built); "
                "leave it at its default")
