"""4D attention masks and position ids that let one forward evaluate a whole token tree.

transformers 5.x passes a 4D `attention_mask` (batch, 1, query rows, key columns) through
unchanged (masking_utils `_preprocess_mask_arguments`); as an additive float mask (0 where a
row may look, the dtype's minimum elsewhere) both SDPA and eager attention honour it
(tests/test_tree_mask.py checks each node against decoding its branch on its own). A node at
depth d sits at position context_len + d - 1, the position it would hold in a chain.
"""

from __future__ import annotations

import torch

from engine.runtime.static_cache import additive


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(R, W) bool -> (1, 1, R, W) additive float mask: 0 where allowed, the dtype's minimum elsewhere."""
    return additive(allowed, dtype)[None, None]


def verify_mask(past: int, num_pending: int, ancestry: torch.Tensor, dtype: torch.dtype,
                device: torch.device) -> torch.Tensor:
    """The target's verify forward: `past` cached positions, then `num_pending` committed tokens
    fed causally, then N tree nodes, each seeing all committed text and its own ancestors and itself.
    ancestry: (N, N) bool (DraftTree.ancestry). Returns (1, 1, P + N, past + P + N)."""
    nodes = ancestry.shape[0]
    rows = num_pending + nodes
    allowed = torch.zeros((rows, past + rows), dtype=torch.bool, device=device)
    allowed[:, :past] = True
    allowed[:num_pending, past:past + num_pending] = torch.ones(num_pending, num_pending, dtype=torch.bool,
                                                                 device=device).tril()
    allowed[num_pending:, past:past + num_pending] = True
    allowed[num_pending:, past + num_pending:] = ancestry.to(device)
    return additive_mask(allowed, dtype)


def level_mask(context: int, visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The draft's forward over one level of the tree: every row sees the `context` committed
    positions; visible (R, fed) says which fed nodes (this level's included) each row sees."""
    rows = visible.shape[0]
    allowed = torch.cat([torch.ones((rows, context), dtype=torch.bool, device=visible.device), visible], dim=1)
    return additive_mask(allowed, dtype)


def tree_positions(start: int, num_pending: int, depths: list[int], device: torch.device) -> torch.Tensor:
    """(1, P + N) position ids: the pending tokens at start.., then each node at
    start + P + depth - 1 (= context_len + depth - 1)."""
    pending = torch.arange(start, start + num_pending, dtype=torch.long)
    nodes = torch.tensor(depths, dtype=torch.long) + (start + num_pending - 1)
    return torch.cat([pending, nodes]).to(device)[None]
