"""The decision core: the plan of one request, the checks and `explain`, the journey, events.

Pure code driven by the drivers (DESIGN §3): no I/O, no clock of its own, no LiteLLM.
May import `policies`, `state` and `ground`.
"""
