"""The one exception type of the package."""
from _tessera import Error


def not_available(what, feature):
    """Raises the error for an option whose implementation has not landed."""
    raise Error(f"{what} is not available yet in Tessera ({feature} is not built); "
                "leave it at its default")
