"""What an attempt that did not answer is, as the plan is told it: the fault of a call the
deadline or the route's first-token limit cut, and the one step that tells the plan an
attempt failed. Shared by the sync and async drivers and the hedged race."""

from __future__ import annotations

from dataclasses import replace

from ..core.gate import Send
from ..core.plan import Plan
from ..ground.outcome import Fault, FaultKind
from ..state.store import Steps
from .seam import failures

__all__ = ["NO_FIRST_TOKEN", "AttemptCut", "cut", "failed", "no_first_token"]


class AttemptCut(Exception):
    """`asyncio.timeout` cut an async attempt: by its own first-token limit or by the
    request's deadline. `fault` is what the plan is told; `error` what the request raises
    if no route answers."""

    def __init__(self, fault: Fault, error: BaseException) -> None:
        super().__init__(fault.message)
        self.fault, self.error = fault, error


DEADLINE = Fault(FaultKind.TIMEOUT, None, "the request's deadline passed during this call")


def cut(send: Send) -> Fault:
    """The fault of an attempt the deadline cut: one the provider may be billing when the
    request had left (it is charged its reservation), else one never sent."""
    if send.wire.left:
        return replace(DEADLINE, billed=True)
    return replace(DEADLINE, sent=False, message="the request's deadline passed before it was sent")


NO_FIRST_TOKEN = "no first token within {:g} s (the route's first_token_timeout)"


def no_first_token(send: Send, limit: float) -> Fault:
    """The fault of an attempt its own first-token limit cut (async: the call is
    cancelled): a timeout the provider may be billing when the request had left, else one
    never sent."""
    message = NO_FIRST_TOKEN.format(limit)
    if send.wire.left:
        return Fault(FaultKind.TIMEOUT, None, message, billed=True)
    return Fault(FaultKind.TIMEOUT, None, message + " before it was sent", sent=False)


def failed(plan: Plan, send: Send, exc: Exception) -> Steps[bool]:
    """Tell the plan an attempt failed; False when `exc` is not a provider outcome (a bug
    or a misuse on this side), which the driver then re-raises unchanged, once what the
    attempt held is settled (`Plan.raised`): no exception keeps a reservation. An attempt
    cut by the deadline or its first-token limit (`AttemptCut`) carries its fault."""
    fault = exc.fault if isinstance(exc, AttemptCut) else failures.classify(exc, send.wire)
    if fault is None:
        yield from plan.raised(send, exc)
        plan.scrub(exc)  # in place: the driver re-raises the same exception, scrubbed
        return False
    yield from plan.failed(send, fault, exc.error if isinstance(exc, AttemptCut) else exc)
    return True
