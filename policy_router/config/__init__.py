"""Configuration: policy files (YAML, TOML, dict) and LiteLLM model_lists and proxy configs.

Turns what a user wrote into the router's arguments, with errors that name the field. May
import anything below the router and `observe`.
"""
