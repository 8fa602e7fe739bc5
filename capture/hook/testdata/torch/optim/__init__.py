from .optimizer import Optimizer  # noqa: F401
from . import optimizer  # noqa: F401
