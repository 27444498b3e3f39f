"""The drivers: a router's one call path (`face`), planning a call, the express and plain
lanes, the sync/async loops, routed streams, batches, and under them the seam to LiteLLM
(`seam`), the only modules that import LiteLLM, the OpenAI SDK or httpx.

Inside, a call runs one way (a contract in `pyproject.toml`): face, planning, the lanes,
calls, streams and loops, attempts, the seam. May import `endpoints`, `core`, `policies`,
`state` and `ground`.
"""
