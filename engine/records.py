"""Step records: frozen dataclasses of plain values that describe one engine step.

These are what the recorder writes and what every figure draws. No tensors ever
reach them, so a trace is cheap to keep, safe to serialise, and replayable
without a model. Field names follow the trace schema, docs/architecture.md §3 (specviz.trace/2).
"""

from __future__ import annotations

from dataclasses import dataclass

VERDICTS = ("accepted", "rejected", "unverified")
EMIT_KINDS = ("accepted", "recovered", "bonus")
TREE_VERDICTS = ("accepted", "rejected", "unreached")
# Where a draft token's id comes from: the engine that ran (SpecViz's own, or a server that returned it),
# SpecViz rebuilding it with the server's own lookup rule (a vLLM n-gram draft), or nowhere (a vLLM server
# does not return its rejected drafts: id None). docs/architecture.md §3 and §10.
DRAFT_ORIGINS = ("engine", "reconstructed", "unknown")


@dataclass(frozen=True)
class Token:
    id: int
    text: str


@dataclass(frozen=True)
class Alternative:
    """One of a model's most likely tokens at a position."""

    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class DraftToken:
    id: int | None                    # None: not returned by the engine that ran (origin "unknown")
    text: str                         # "" when unknown
    q: float | None                   # draft probability of this token (None: n-gram point mass, or not reported)
    top: tuple[Alternative, ...] = ()
    origin: str = "engine"            # DRAFT_ORIGINS

    @property
    def known(self) -> bool:
        """True when the token's id is known (returned by the engine or reconstructed)."""
        return self.id is not None


@dataclass(frozen=True)
class TargetToken:
    id: int | None                    # the token the target emits at this position if reached, else its argmax;
                                      # None where the engine did not say (a vLLM server, past the first rejection)
    text: str
    p: float | None                   # target probability of the draft token here (None at the bonus position,
                                      # or not reported by the engine)
    top: tuple[Alternative, ...] = ()

    @property
    def known(self) -> bool:
        return self.id is not None


@dataclass(frozen=True)
class EmittedToken:
    id: int
    text: str
    kind: str                         # "accepted" | "recovered" | "bonus"


@dataclass(frozen=True)
class CacheLengths:
    """One model's KV cache length through a step.

    `cutoff` positions were removed (after_cutoff == after_forward - cutoff; 0 in the lab modes
    that remove nothing): a dynamic cache frees them, a static cache moves its write pointer back
    over them, and they stay in memory (`masked`) until a forward overwrites them. `stale` counts the positions left after the step that hold no committed
    text (rejected drafts kept, rows zero-filled), over the whole run so far; 0 under truncation,
    None when unknown (a specviz.trace/1 file, whose `cutoff` is read as given).
    """

    before: int                       # == the previous step's after_cutoff
    after_forward: int
    cutoff: int
    after_cutoff: int
    stale: int | None
    masked: int | None = None         # static cache: rows past its write pointer still holding cut tokens'
                                      # keys and values (masked until overwritten); None: a dynamic cache frees them
    capacity: int | None = None       # static cache: the rows it was sized for; None: a dynamic cache

    @property
    def num_text(self) -> int | None:
        """Positions that hold committed text, or None when `stale` is unknown."""
        return None if self.stale is None else self.after_cutoff - self.stale


@dataclass(frozen=True)
class TreeNode:
    """One candidate token of a drafted tree (docs/architecture.md §3, `tree`)."""

    id: int                           # 0-based, in the order the verify forward fed the nodes
    parent: int | None                # parent node id; None for the root's children (they follow the committed text)
    depth: int                        # 1 for the root's children
    token: Token
    q: float | None                   # draft probability of this token after its ancestors
    p: float                          # target probability of this token after its ancestors
    verdict: str                      # TREE_VERDICTS: accepted | rejected | unreached
    accept_prob: float | None = None  # the probability it was accepted with when tried (None: greedy or unreached)
    draw: float | None = None         # the uniform draw compared with accept_prob (None: greedy or unreached)


@dataclass(frozen=True)
class TreeRecord:
    """The tree one step drafted and verified in one target forward; `path` lists the accepted
    node ids root-first (len(path) == the step's num_accepted)."""

    nodes: tuple[TreeNode, ...]
    path: tuple[int, ...]


@dataclass(frozen=True)
class StepTiming:
    draft: float                      # milliseconds: the draft phase (its forwards and choosing its tokens)
    verify: float                     # the target's verify forward and its probabilities
    total: float                      # the whole step, wall clock
    engine: float | None = None       # the rest: acceptance, the record's one copy to the host, cutoff, emit
                                      # (None in traces from before it was measured)


@dataclass(frozen=True)
class StepRecord:
    index: int
    context_len: int                  # committed tokens (prompt + emitted) before the step
    k: int                            # draft tokens actually proposed this step
    carryover: tuple[Token, ...]      # fed to the draft model before drafting
    draft: tuple[DraftToken, ...]
    target: tuple[TargetToken, ...]   # k + 1 entries
    verdicts: tuple[str, ...]         # one per draft token
    accept_prob: tuple[float | None, ...]  # min(1, p/q) per draft token; None in greedy mode
    draws: tuple[float | None, ...]   # the uniform draw compared with accept_prob; None in greedy mode
    num_accepted: int
    emitted: tuple[EmittedToken, ...]
    kv_target: CacheLengths
    kv_draft: CacheLengths | None     # None for the n-gram drafter
    timing: StepTiming
    eos: bool
    residual: tuple[Alternative, ...] = ()   # top of norm(max(0, p - q)) at a sampled rejection
    overlap: tuple[float, ...] = ()          # sum_x min(p(x), q(x)) per draft position
    tree: TreeRecord | None = None           # tree runs only; the chain fields above then describe its main line

    @property
    def num_emitted(self) -> int:
        return len(self.emitted)

    @property
    def num_kept(self) -> int:
        """Accepted drafts that stay in the output: num_accepted, fewer when an EOS ended the run early."""
        return sum(token.kind == "accepted" for token in self.emitted)

    @property
    def rejected_at(self) -> int | None:
        """Draft position (0-based) of the first rejection, or None."""
        return self.verdicts.index("rejected") if "rejected" in self.verdicts else None
