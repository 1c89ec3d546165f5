"""engine/vllm/ngram.py against two oracles: a brute-force reading of vLLM's rule (the longest suffix
n-gram within [min_n, max_n] that occurs earlier, its earliest occurrence, up to k tokens after it),
and, with the vllm marker, vLLM 0.32's own numba function run in .venv-vllm."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from engine.vllm.ngram import propose


def brute_force(context: list[int], min_n: int, max_n: int, k: int) -> tuple[int, ...]:
    total = len(context)
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = context[total - n:]
        for start in range(0, total - n):
            if context[start:start + n] == suffix:
                return tuple(context[start + n:start + n + k])
    return ()


def cases(count: int, seed: int = 0) -> list[tuple[list[int], int, int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        alphabet = rng.randint(2, 5)
        context = [rng.randrange(alphabet) for _ in range(rng.randint(0, 30))]
        min_n = rng.randint(1, 4)
        out.append((context, min_n, rng.randint(min_n, 6), rng.randint(1, 6)))
    return out


def test_the_rule_matches_the_brute_force_reading() -> None:
    found = 0
    for context, min_n, max_n, k in cases(3000):
        expected = brute_force(context, min_n, max_n, k)
        assert propose(context, min_n, max_n, k) == expected, (context, min_n, max_n, k)
        found += bool(expected)
    assert found > 1000       # most cases draft something: the comparison is not between empty tuples


def test_examples_and_the_context_limit() -> None:
    assert propose([1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3], 1, 3, 2) == (9, 1)      # earliest of the two matches
    assert propose([1, 2, 3, 4], 1, 3, 3) == ()                               # no earlier occurrence
    assert propose([5, 6, 5, 6, 5], 2, 2, 4) == (6, 5)                        # earliest match, cut at the end
    assert propose([5, 6, 5, 6, 5], 2, 2, 4, max_model_len=6) == (6,)        # no drafts past the context
    assert propose([5], 2, 3, 4) == ()


@pytest.mark.vllm
def test_the_rule_matches_vllm_itself() -> None:
    from engine.vllm.server import vllm_python
    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM environment (.venv-vllm): scripts/test.sh installs it")
    sample = cases(300, seed=1)
    script = ("import json, sys, numpy as np\n"
              "from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens as f\n"
              "print(json.dumps([f(np.array(c, dtype=np.int32), a, b, 10**6, k).tolist()\n"
              "                  for c, a, b, k in json.load(sys.stdin)]))\n")
    answer = subprocess.run([str(python), "-c", script], input=json.dumps(sample), capture_output=True, text=True,
                            timeout=600, check=True)
    theirs = json.loads(answer.stdout.strip().splitlines()[-1])
    assert [list(propose(c, a, b, k)) for c, a, b, k in sample] == theirs
