"""The `policy-router` command line: demo, check, explain, prices, report.

The top of the package: may import every part. Only `cli.demo` imports `testing`, for the
embedded FakeProvider the demo runs on.
"""

from .main import main

__all__ = ["main"]
