"""The audit: another engine's emitted tokens scored under SpecViz's target (issue 32, item 6).

With the same weights loaded here, each token a run emitted (a vLLM server's, say) gets the
target's probability of it given the emitted prefix, at the run's temperature, top-k and top-p,
from one forward over the whole text (score.py, which imports torch). Tokens the target would
sample less than once in a million are *marked* (marks.py, torch-free: the records and their
words, which the page may import). `python -m engine.audit` prints the marked steps of a saved
trace or token list (docs/benchmark.md, "vLLM").
"""

from engine.audit.marks import RARE, Audit, TokenScore

__all__ = ["RARE", "Audit", "TokenScore"]
