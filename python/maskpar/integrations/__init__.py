"""Adapters that plug maskpar into serving frameworks.

Each submodule imports its framework (and torch) itself, so ``import maskpar``
and ``import maskpar.integrations`` never do; import the one you need, e.g.
``maskpar.integrations.sglang``.
"""
