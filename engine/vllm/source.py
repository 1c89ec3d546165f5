"""A run on a vLLM server as a Generation (specviz/serving/runner.py): `step()` waits for the next
chunk and returns its step, `trace()` is a valid Trace at any point; once the final chunk brings
the per-step arrays the trace is rebuilt from them (docs/architecture.md §10). Until then its steps
are provisional (`Trace.split`); a run that ends without them (a cut stream, a time-out, a stop) or
whose counts do not split its tokens keeps its tokens "unsplit", never the provisional guess.

The prompt is tokenized by the server (`/tokenize`; through its chat template unless the config
says raw or the tokenizer has none), so the ids are the server's; each token's text comes from
`/detokenize`, asked once per distinct id.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from engine.config import SpecConfig
from engine.formats.trace import TextTokens, Trace
from engine.records import StepRecord
from engine.vllm.ngram import DEFAULT_LOOKUP
from engine.vllm.server_info import ServerInfo, probe
from engine.vllm.stream import CompletionStream, SpecMetrics, StreamChunk, completion_body
from engine.vllm.to_trace import build_trace, external_config
from engine.vllm.transport import DEFAULT_READ_TIMEOUT_S, Session, VllmError


class TokenTexts:
    """Each token's text as the server's tokenizer writes it alone, cached per id, over one connection."""

    def __init__(self, info: ServerInfo, session: Session):
        self.info = info
        self._texts: dict[int, str] = {}
        self._session = session
        self._refused = False           # a lookup failed since the last `retry()`: ask no more until then

    def __call__(self, ids: Sequence[int]) -> list[str]:
        for token in dict.fromkeys(ids):
            if token not in self._texts:
                answer = self._session.post_json("/detokenize", {"model": self.info.model, "tokens": [token]})
                self._texts[token] = str(answer.get("prompt", "")) if isinstance(answer, dict) else ""
        return [self._texts[token] for token in ids]

    def or_ids(self, ids: Sequence[int]) -> list[str]:
        """The texts, or where the server cannot be asked (it died mid-run) ⟨id⟩ for each token not known yet:
        a trace never loses a token that arrived for want of its text. After a failed lookup the server is not
        asked again until `retry()` (one try per rebuilt trace, not one per step: a dead server refuses each)."""
        if not self._refused:
            try:
                return self(ids)
            except VllmError:
                self._refused = True
        return [self._texts.get(token, f"⟨{token}⟩") for token in ids]

    def retry(self) -> None:
        """Ask the server again at the next lookup (nothing unknown is cached: a server that answers gives it)."""
        self._refused = False

    def unnamed(self, ids: Sequence[int]) -> int:
        """How many of `ids` have no text from the server (they read ⟨id⟩)."""
        return sum(token not in self._texts for token in ids)


def tokenize(info: ServerInfo, session: Session, prompt: str, raw: bool) -> tuple[int, ...]:
    """The prompt's ids by the server's tokenizer: its chat template first unless `raw` (or it has none)."""
    if not raw:
        try:
            answer = session.post_json("/tokenize", {"model": info.model, "add_generation_prompt": True,
                                                     "messages": [{"role": "user", "content": prompt}]})
            return tuple(answer["tokens"])
        except (VllmError, KeyError, TypeError):
            pass        # no chat template: the prompt goes as it is, as SpecViz's own engine sends it
    answer = session.post_json("/tokenize", {"model": info.model, "prompt": prompt})
    try:
        return tuple(int(token) for token in answer["tokens"])
    except (KeyError, TypeError, ValueError):
        raise VllmError(f"The server at {info.address} did not tokenize the prompt as vLLM does.") from None


class VllmGeneration:
    """One streamed request; drive it as specviz/serving/runner.py's Generation."""

    def __init__(self, info: ServerInfo, prompt: str, config: SpecConfig, *,
                 read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
                 ngram_lookup: tuple[int, int] = DEFAULT_LOOKUP):
        info.check_usable()
        self.info = info
        self.config = external_config(info, config, ngram_lookup)
        self._session = Session(info.address)      # tokenize and every token's text over one connection
        prompt_ids = tokenize(info, self._session, prompt, config.raw)
        if info.max_model_len is not None and len(prompt_ids) + config.max_new_tokens > info.max_model_len:
            raise VllmError(f"The prompt ({len(prompt_ids)} tokens) and {config.max_new_tokens} new tokens exceed the "
                            f"server's context of {info.max_model_len} tokens: shorten one.")
        self.prompt = TextTokens(prompt, prompt_ids)
        self._texts = TokenTexts(info, self._session)
        body = completion_body(info.model, list(prompt_ids), config, info.cpu_sampler_fix)
        self._stream = CompletionStream(info, body, read_timeout_s)
        self._chunks: list[StreamChunk] = []
        self._iterator: Iterator[StreamChunk] = iter(self._stream)
        self._returned = 0              # steps handed out by step()
        self._done = False
        self._trace: Trace | None = None
        self._unsplit = False           # the run ended without a split: the trace keeps the tokens alone
        self._proposals: dict[int, tuple[int, ...]] = {}    # the n-gram rule's answers by context length

    @property
    def is_done(self) -> bool:
        return self._done

    @property
    def metrics(self) -> SpecMetrics | None:
        """The server's own per-request speculative metrics, once the run is done."""
        return self._stream.metrics if self._done else None

    @property
    def sent_s(self) -> float:
        """time.perf_counter() when the request went out."""
        return self._stream.started_s

    @property
    def chunks(self) -> tuple[StreamChunk, ...]:
        """The stream's chunks so far, each with its arrival time."""
        return tuple(self._chunks)

    def step(self) -> StepRecord:
        """The next engine step (waits for the server's next chunk); the chunk that finishes the run ends
        it: the trace is then rebuilt from the server's per-step arrays. A VllmError leaves the trace
        unsplit (the tokens that arrived, no verdicts)."""
        if self._done:
            raise RuntimeError("the run is over")
        try:
            while self._returned >= len(self.trace().steps):
                try:
                    chunk = next(self._iterator)
                except StopIteration:
                    return self._finish()
                self._chunks.append(chunk)
                self._trace = None
                if chunk.finish_reason is not None:
                    return self._finish()
        except VllmError:
            if not self._done:      # a run the server finished keeps its split even when its texts are missing
                self._unsplit, self._trace = True, None
            raise
        self._returned += 1
        return self.trace().steps[self._returned - 1]

    def _finish(self) -> StepRecord:
        """Read the rest of the stream (usage, metrics, [DONE]) and rebuild the trace from the arrays."""
        for chunk in self._iterator:
            self._chunks.append(chunk)
        if self._stream.metrics is None and isinstance(self._stream.stop_reason, str):
            # vLLM 0.32 attaches a request's statistics only to the output its scheduler finishes it with
            # (vllm/v1/core/sched/scheduler.py, `spec_decode_metrics=... if finish_reason is not None`); a
            # stop string is matched later, in its API process (vllm/v1/engine/output_processor.py), which
            # then finishes the request without them.
            raise VllmError(f"vLLM ended the run at the stop string {self._stream.stop_reason!r} without its "
                            "per-step counts (vLLM 0.32 sends none for a run a stop string ends): its tokens are "
                            "kept, unsplit.")
        if self._stream.metrics is None or not self._chunks or not self._stream.metrics.per_step:
            raise VllmError("The vLLM server finished without its per-step counts: start it with "
                            "--per-request-spec-decode-metrics detailed.")
        self._done, self._trace = True, None
        trace = self.trace()
        self._session.close()       # every token's text the server gives is known now: the trace is final
        self._returned = len(trace.steps)
        if unnamed := self._texts.unnamed(trace.output.token_ids):
            # The stream can outrun the server: a tiny model sends a whole run before the client reads it, and a
            # server that dies then has said everything but the texts.
            raise VllmError(f"The vLLM server at {self.info.address} sent the whole run, then did not answer "
                            f"/detokenize for {unnamed} of its {len(trace.output.token_ids)} tokens: the run is "
                            "kept, split by its per-step counts, with those tokens shown as ⟨id⟩.")
        return trace.steps[-1]

    def close(self) -> None:
        """Close the connections: the server then aborts the request (a stopped run, kept unsplit)."""
        close = getattr(self._iterator, "close", None)
        if close is not None:
            close()
        if not self._done:
            self._unsplit, self._trace = True, None
            try:
                self.trace()        # every token's text while the connection is open
            except VllmError:
                pass                # the server is gone: trace() says so when asked
        self._session.close()

    def trace(self) -> Trace:
        """What arrived so far as a trace; complete, and split by the server's arrays, once the run is done;
        provisional before, unsplit after a failure or a stop. A token whose text the server cannot give (it
        died) reads ⟨id⟩, so the stream's own error, not the text lookup's, ends the run; a finished run with
        such tokens ends with its own sentence (`_finish`)."""
        if self._trace is None:
            self._texts.retry()
            self._trace = build_trace(self.info, self.config, self.prompt, self._chunks,
                                      self._stream.metrics if self._done else None, self._stream.started_s,
                                      self._texts.or_ids, self._done,
                                      self._stream.finish_reason, self._proposals, unsplit=self._unsplit)
        return self._trace


def start_generation(address: str, prompt: str, config: SpecConfig, method: str = "draft_model", dtype: str = "",
                     expected_model: str = "", read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
                     ngram_lookup: tuple[int, int] = DEFAULT_LOOKUP) -> VllmGeneration:
    """Probe the server, check SpecViz can draw its runs, and send the request (VllmError: one sentence).
    `ngram_lookup`: the n-gram server's (prompt_lookup_min, prompt_lookup_max), vLLM's (5, 5) unless set."""
    info = probe(address, method, dtype)
    info.check_usable(expected_model)
    return VllmGeneration(info, prompt, config, read_timeout_s=read_timeout_s, ngram_lookup=ngram_lookup)
