"""The drivers: planning a call, the sync/async loops, routed streams, batches, the
transport, and the LiteLLM-shaped call methods a router offers (`face`).

The only part that imports LiteLLM. May import `endpoints`, `core`, `policies`, `state`
and `ground`.
"""
