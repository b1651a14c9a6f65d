"""Fixtures of the inspector tests; the environments themselves are built in inspector_env."""

from inspector_env import bare_venv, decoy_bin, fresh_venv, full_venv, wheels

__all__ = ["bare_venv", "decoy_bin", "fresh_venv", "full_venv", "wheels"]
