"""Configuration: policy files (YAML, TOML, dict) and LiteLLM model_lists and proxy configs.

Turns what a user wrote into the router's arguments, with errors that name the field; builds
those arguments into the `Assembly` a router holds (and rebuilds it, state carried, when the
router is reconfigured), says what changed between two configurations, and reads what a
router holds. May import anything below the router and `observe`.
"""
