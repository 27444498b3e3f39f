"""FakeProvider: a real OpenAI-compatible HTTP server on loopback, with scripted faults.

It is public on purpose: a team can test its own routing configuration against it, over
real HTTP, through LiteLLM's real code path (`openai/<name>` with `api_base`), without a key
or a network. Each model name has a script, a queue of steps consumed one per request; when
the queue is empty the model answers normally. The server counts every request it received
per model, so a test can compare what was really sent with what a journey says.

    with FakeProvider() as fake:
        fake.script("flaky", Fail(503), Reply("second time lucky"))
        Route("openai/flaky", api_base=fake.base_url, api_key="sk-fake")

It is a test double, not a faithful OpenAI: it ignores sampling parameters and counts one
token a word (see `billing.py`), but it bills every part of a request a real provider
bills, honours `n`, `max_tokens`/`max_completion_tokens` and a model's own output limit.
"""

from .responder import Cooperative
from .server import FakeProvider
from .steps import (
    Cut,
    Drop,
    Fail,
    Hang,
    Malformed,
    NoDone,
    NoFinish,
    Refuse,
    Reply,
    Stall,
    Step,
    StreamError,
    Trickle,
)

__all__ = [
    "Cooperative",
    "Cut",
    "Drop",
    "Fail",
    "FakeProvider",
    "Hang",
    "Malformed",
    "NoDone",
    "NoFinish",
    "Refuse",
    "Reply",
    "Stall",
    "Step",
    "StreamError",
    "Trickle",
]
