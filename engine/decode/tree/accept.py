"""Walking a verified token tree: pure functions of the target's rows and a generator.

Rows follow the verify forward: row 0 is the target's law after the committed text (for the
root's children), row i + 1 its law after node i (for node i's children).

Greedy: from the root, accept the child whose token is the target's argmax at its parent;
stop at a leaf or where no child matches; the target's argmax there is the bonus (leaf) or
recovered token. The accepted path is a line of target argmaxes, so the output is target-only
greedy decoding's (up to float rounding, docs/architecture.md §4).

Sampling: SpecInfer's multi-step speculative sampling (Miao et al. 2024, Algorithm 2) with
deterministic candidates, as EAGLE's evaluate_posterior runs it (Li et al. 2024). The
children of an accepted node are tried in order against the target law p; a top-b
candidate x is a point mass (q = one-hot(x)), so it is accepted with probability
min(1, p(x) / 1) = p(x), and on rejection p becomes norm(max(0, p - one-hot(x))) = p with x
removed, renormalised (verify.residual_distribution). When every child is rejected the token
is drawn from what is left. Each trial either returns x, with probability p(x), or goes on
with the law of p given "not x": the emitted token is distributed as p, lossless in law.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decode.sampling import draw
from engine.decode.tree.shape import DraftTree
from engine.decode.verify import residual_distribution


@dataclass(frozen=True)
class TreeWalk:
    path: tuple[int, ...]                      # accepted node ids, root first
    next_token: int                            # the recovered or bonus token after the path
    next_kind: str                             # "recovered" (a child of the stop node was rejected) | "bonus" (a leaf)
    verdicts: tuple[str, ...]                  # per node: accepted | rejected | unreached
    accept_probs: tuple[float | None, ...]     # per node tried: the probability it was accepted with (None: greedy)
    draws: tuple[float | None, ...]            # per node tried: its uniform draw (None: greedy)
    residual: torch.Tensor | None              # (V,) what the token was drawn from after a sampled rejection
    stop_rejected: int | None                  # the first child rejected at the stop node (the main line's end)


@dataclass(frozen=True)
class TreeData:
    """A verified tree, for the recorder: the tree, its walk and the target's rows (N + 1, V)."""

    tree: DraftTree
    walk: TreeWalk
    target_probs: torch.Tensor

    def target_p(self) -> list[float]:
        """Per node: the target's probability of its token after its ancestors."""
        if not self.tree.size:
            return []
        device = self.target_probs.device
        rows = torch.tensor([parent + 1 for parent in self.tree.parents], dtype=torch.long, device=device)
        tokens = torch.tensor(self.tree.tokens, dtype=torch.long, device=device)
        return self.target_probs[rows, tokens].tolist()


def walk_greedy(children: list[list[int]], tokens: list[int], choices: list[int]) -> TreeWalk:
    """children[r]: the nodes after row r (DraftTree.children); choices[r]: the target's argmax at row r."""
    verdicts = ["unreached"] * len(tokens)
    path: list[int] = []
    row = 0
    while True:
        match = next((child for child in children[row] if tokens[child] == choices[row]), None)
        for child in children[row]:
            verdicts[child] = "accepted" if child == match else "rejected"
        if match is None:
            break
        path.append(match)
        row = match + 1
    nothing = (None,) * len(tokens)
    stop = children[row]
    return TreeWalk(tuple(path), choices[row], "recovered" if stop else "bonus", tuple(verdicts), nothing, nothing,
                    None, stop[0] if stop else None)


def walk_sampling(children: list[list[int]], tokens: list[int], target_probs: torch.Tensor,
                  generator: torch.Generator | None) -> TreeWalk:
    """target_probs: (N + 1, V), through the run's temperature / top-k / top-p. Draws one uniform
    per node up front (used only if the node is tried), then the final token."""
    count = len(tokens)
    uniforms = torch.rand(count, generator=generator, device=target_probs.device).tolist() if count else []
    verdicts = ["unreached"] * count
    accept_probs: list[float | None] = [None] * count
    draws: list[float | None] = [None] * count
    path: list[int] = []
    row = 0
    while True:
        law = target_probs[row]                                            # (V,)
        accepted = None
        for child in children[row]:
            accept_probs[child] = min(float(law[tokens[child]]), 1.0)
            draws[child] = uniforms[child]
            if uniforms[child] < accept_probs[child]:
                accepted = child
                break
            verdicts[child] = "rejected"
            law = residual_distribution(law, None, tokens[child])          # p with the candidate removed
        if accepted is None:
            break
        verdicts[accepted] = "accepted"
        path.append(accepted)
        row = accepted + 1
    next_token = int(draw(law, generator).item())
    stop = children[row]
    return TreeWalk(tuple(path), next_token, "recovered" if stop else "bonus", tuple(verdicts), tuple(accept_probs),
                    tuple(draws), law if stop else None, stop[0] if stop else None)
