"""The benchmark's prompts: five kinds of request, from easy to draft (code, a list) to hard (chat)."""

from __future__ import annotations

PROMPTS = {
    "code": "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
    "explanation": "Explain in a short paragraph how a hash map handles collisions.",
    "summary": "Summarize in two sentences: The mitochondrion is an organelle found in most eukaryotic cells. "
               "It generates most of the cell's supply of ATP, used as a source of chemical energy, and it is "
               "involved in signaling, cell differentiation and cell death.",
    "repetition": "List the numbers from 1 to 40 separated by commas.",
    "chat": "Hi! Can you suggest three names for a small orange cat?",
}
