"""The ground: plain values every part may use (Route, Reach, errors, Money, records, clock, ids).

Imports nothing of the package above it; of LiteLLM only its exception classes, which the
package's own errors extend.
"""
