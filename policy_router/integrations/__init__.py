"""Integrations: the router under other frameworks (LangChain) and OpenTelemetry's public path.

May import the router and every part below it; nothing in the product imports an
integration, so each needs its extra only when it is imported.
"""
