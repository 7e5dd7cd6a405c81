"""IREE compile and cache, devices, ``staged.compile`` and deployable steps."""

from .deploy import Deployed, load  # noqa: F401
