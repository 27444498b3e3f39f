"""The seam to LiteLLM: the only modules of the package that import `litellm`, `openai` or
`httpx` (the package's errors extend LiteLLM's classes; the LiteLLM integration is a
provider).

What crosses it: the call into LiteLLM with its retries off and the wire checkpoint hooked
in (`transport`), LiteLLM's exceptions read as the router's faults (`failures`) and raised
in a provider's name (`raised`), what LiteLLM knows of a model (`model_info`) and of its
credentials (`credentials`), its prompt token counter (`tokens`), the HTTP clients it keeps
watched for a connection off the machine (`guard`), its global settings (`settings`), the
functions whose path never logs (`unlogged`), its stream events (`stream_events`), and what
it would import in a call's middle, loaded when a router is built (`preload`).
"""
