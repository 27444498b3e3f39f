"""State shared by requests: the Store protocol, InMemoryStore, `state.sqlite` and
`state.redis`.

Knows no plan and no policy: it keeps health, spend and rate windows for whoever asks.
May import `ground` only.
"""
