"""Token trees (docs/architecture.md §2, "Token trees"): draft a tree, verify every node in one
target forward with a 4D ancestor mask, walk the longest accepted path, gather the caches.

draft.py the tree drafter on the draft model; shape.py the drafted tree; mask.py masks and
positions; accept.py the greedy and lossless sampling walks; step.py one step of a tree run.
"""
