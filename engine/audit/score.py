"""Score emitted tokens under the target: one forward over the prompt and the emitted text.

Row i of the forward over `prompt + emitted[:-1]` (its last n rows) is the target's law for
emitted token i given the emitted prefix, passed through the run's temperature / top-k / top-p
exactly as SpecViz's own sampling does (engine/decode/sampling.py `to_probs`). An id past the
shared vocabulary (a padding row of the output head) has probability 0 here, as SpecViz masks it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.audit.marks import RARE, Audit, TokenScore
from engine.decode.pair import ModelPair
from engine.decode.sampling import SamplingParams, to_probs
from engine.records import Alternative

TOP = 3               # alternatives shown beside a marked token


def score_tokens(pair: ModelPair, prompt_ids: Sequence[int], emitted_ids: Sequence[int], temperature: float,
                 top_k: int = 0, top_p: float = 1.0, steps: Sequence[int] | None = None,
                 threshold: float = RARE, kinds: Sequence[str] | None = None) -> Audit:
    """The target's probability of each emitted token given the prompt and the tokens before it.
    `steps` and `kinds` (one per emitted token, optional: marks.token_kinds) name the engine step
    that emitted each and how."""
    if not prompt_ids:
        raise ValueError("the prompt has no tokens: the first emitted token has nothing to be scored after")
    if steps is not None and len(steps) != len(emitted_ids):
        raise ValueError(f"{len(steps)} step numbers for {len(emitted_ids)} emitted tokens: give one per token")
    if kinds is not None and len(kinds) != len(emitted_ids):
        raise ValueError(f"{len(kinds)} token kinds for {len(emitted_ids)} emitted tokens: give one per token")
    if not emitted_ids:
        return Audit(temperature, top_k, top_p, threshold, (), 0.0)
    params = SamplingParams(temperature, top_k, top_p)
    vocab = pair.vocab_size
    inputs = [*prompt_ids, *emitted_ids[:-1]]
    outside = next((token for token in inputs if not 0 <= token < vocab), None)
    if outside is not None:
        raise ValueError(f"token id {outside} is outside the {vocab} ids the target knows: were these tokens "
                         f"produced with another tokenizer?")
    with torch.inference_mode():
        logits = pair.target(input_ids=torch.tensor([inputs], device=pair.device),
                             logits_to_keep=len(emitted_ids)).logits[0, :, :vocab].float()     # (n, V)
        probs = to_probs(logits, params)                                                       # (n, V)
        rare_mass = (probs * (probs < threshold)).sum(dim=-1) if temperature > 0 else torch.zeros(len(emitted_ids))
        top = torch.topk(probs, min(TOP, vocab), dim=-1)
        argmax_logit = logits.max(dim=-1).values
    scores = []
    for i, token in enumerate(emitted_ids):
        known = 0 <= token < vocab
        p = float(probs[i, token]) if known else 0.0
        if temperature == 0:
            margin = float(argmax_logit[i] - logits[i, token]) if known else None
            marked = not known or margin > 0
        else:
            margin, marked = None, p < threshold
        alternatives = tuple(Alternative(int(t), pair.token_text(int(t)), float(q))
                             for t, q in zip(top.indices[i].tolist(), top.values[i].tolist()))
        text = pair.token_text(token) if known else f"<id {token}, past the shared vocabulary>"
        scores.append(TokenScore(i, None if steps is None else steps[i], token, text, p, alternatives, marked, margin,
                                 None if kinds is None else kinds[i]))
    return Audit(temperature, top_k, top_p, threshold, tuple(scores), float(rare_mass.double().sum()))


def steps_of(step_sizes: Sequence[int]) -> list[int]:
    """Step numbers, one per token, from the tokens each step emitted ([2, 1, 3] -> [0, 0, 1, 2, 2, 2])."""
    return [step for step, size in enumerate(step_sizes) for _ in range(size)]
