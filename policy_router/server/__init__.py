"""The server: the router behind an OpenAI-compatible HTTP API (`policy-router serve`), so a
client in any language, through any SDK that can set `base_url`, is routed by it.

Each API key is a tenant with its own budget, rate limit and floor (`tenants`); a request's
arguments are read and checked before anything is sent (`reading`); answers, errors and the
journey go back in OpenAI's shapes (`answers`) or Anthropic's (`anthropic`), over Starlette
(`app`) and uvicorn (`serving`, `worker`). Needs the
`server` extra. May import the router and every part below it; never `integrations`.
"""

from .app import create_app
from .serving import serve

__all__ = ["create_app", "serve"]
