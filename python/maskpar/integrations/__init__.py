"""Adapters that plug maskpar into serving frameworks.

Each adapter is its own module (``maskpar.integrations.vllm``,
``maskpar.integrations.sglang``) and imports its framework (and torch) only
when that module is imported: ``import maskpar`` and
``import maskpar.integrations`` never import a framework or torch.
"""
