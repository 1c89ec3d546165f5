"""The target's choice at a sampled step (issue 41): "·use" sat beside "target top: ·follow 0.54" unexplained, read
as the target's argmax. Each filled cell says how the token came: an accepted draft kept as drafted, the recovered
token drawn from the residual and the bonus drawn from p, naming the argmax where the draw is another token.
Checked on the recorded sampled run against each row's own records (the oracle: a rejected row's token is the
recovered one the step emitted; an accepted row's is its draft)."""

from __future__ import annotations

import re
from html import unescape

from specviz.assets import ASSETS_DIR, load_demo_trace
from specviz.run.step_detail import step_detail_html
from specviz.tokens import visible

CELL = re.compile(r"<td data-label='target&#x27;s choice'><code class='sv-code'>([^<]*)</code><br><small>([^<]*)</small>")


def sampled_trace():
    return next(trace for _, trace in load_demo_trace(ASSETS_DIR).offered() if not trace.config.is_greedy)


def test_each_sampled_choice_says_how_it_came_and_names_the_argmax_a_draw_passed_over():
    trace = sampled_trace()
    passed_over = 0
    for step in trace.steps:
        said = [(unescape(token), unescape(how)) for token, how in CELL.findall(step_detail_html(trace, step.index))]
        reached = [i for i, verdict in enumerate(step.verdicts) if verdict != "unverified"]
        if step.num_accepted == step.k:
            reached.append(step.k)                                  # the bonus row
        assert len(said) == len(reached), step.index
        for (token, how), position in zip(said, reached):
            target = step.target[position]
            assert token == visible(target.text)
            argmax = target.top[0]
            if position == step.k:
                assert how.startswith("drawn from p") and target.id == step.emitted[-1].id
            elif step.verdicts[position] == "accepted":
                assert how == "the draft, kept" and target.id == step.draft[position].id
            else:
                assert how.startswith("drawn from the residual") and target.id == step.emitted[-1].id
            names_argmax = f"not the argmax “{visible(argmax.text)}”" in how
            assert names_argmax == (argmax.id != target.id and position not in range(step.num_accepted))
            passed_over += names_argmax
    assert passed_over > 0                                          # the case is in the recording


def test_a_greedy_step_s_choice_carries_no_draw_note():
    greedy = next(trace for _, trace in load_demo_trace(ASSETS_DIR).offered() if trace.config.is_greedy)
    assert not any(CELL.search(step_detail_html(greedy, step.index)) for step in greedy.steps)
