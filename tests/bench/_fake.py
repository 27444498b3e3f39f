"""Run FakeProvider in a child process, so its CPU time is not counted as the caller's."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection


def _serve(conn: Connection) -> None:
    from policy_router.testing import FakeProvider

    with FakeProvider() as fake:
        conn.send(fake.base_url)
        conn.recv()  # block until told to stop


@contextmanager
def fake_in_child() -> Iterator[str]:
    """Yield the base URL of a FakeProvider serving from another process."""
    parent, child = mp.Pipe()
    process = mp.get_context("spawn").Process(target=_serve, args=(child,), daemon=True)
    process.start()
    try:
        yield str(parent.recv())
    finally:
        parent.send("stop")
        process.join(5)
        if process.is_alive():
            process.terminate()
