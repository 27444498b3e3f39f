"""The Redis store: many processes, one breaker, one budget, one set of rate windows.

May import `state` and `ground`. Needs the `redis` extra only when a store is built.
"""
