"""The drivers: planning a call, the sync/async loops, routed streams, and the transport.

The only part that imports LiteLLM. May import `endpoints`, `core`, `policies`, `state`
and `ground`.
"""
