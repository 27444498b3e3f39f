"""The policies: each module answers one question (may this route serve, what may it cost,
is it resting, in which order) and does no I/O of its own.

May import `state` (the Store protocol) and `ground`; never the core, the drivers or LiteLLM.
"""
