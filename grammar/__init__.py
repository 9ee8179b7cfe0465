"""Lark grammars for the subscription language and the P4 spec subset, shipped as package data."""

from importlib.resources import files


def grammar_text(name: str) -> str:
    """Return the text of ``grammar/<name>.lark``."""
    return files(__name__).joinpath(f"{name}.lark").read_text(encoding="utf-8")
