"""Scopes and traversal (main graph, subgraphs to any depth, model-local functions),
constants in scope, and removal of what nothing uses."""
