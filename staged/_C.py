"""``staged._C``: the few entry points of torch's C extension that Python libraries call
on every use (torchvision's model constructors log their use through it)."""

from __future__ import annotations


def _log_api_usage_once(event: str) -> None:
    """Nothing: torch logs API use only to a logger an organisation installs in C++, which
    staged has none of (torch's is a no-op by default too)."""
