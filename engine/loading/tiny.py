"""The `tiny-random` pair: a seeded random tiny Llama target and a noisy copy as draft.

No files and no downloads, so it loads at once (docs/benchmark.md): tests and
instant demos use it. The draft is the target's weights plus seeded Gaussian
noise, which keeps the two correlated, so some drafts are accepted and some are
not: at the default noise, greedy acceptance at k=4 is about 60 % and the
sampling acceptance rate (1 - total variation distance) about 0.87. The tokenizer is
character level over printable ASCII, built with the `tokenizers` library, and
has no chat template.
"""

from __future__ import annotations

import string

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from engine.config import MODEL_DRAFTER
from engine.decode.pair import ModelPair
from engine.presets import TINY_RANDOM

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")   # ids 0..3
ASCII_CHARACTERS = "".join(c for c in string.printable if c not in "\r\x0b\x0c")  # 97 characters
DEFAULT_DRAFT_NOISE = 0.03     # noise std relative to each weight matrix's own std
INIT_STD = 0.1                 # weight init std (Llama's default 0.02 gives nearly flat outputs)
HEAD_SCALE = 4.0               # scales the output head, so next-token distributions are peaked
EOS_LOGIT_SCALE = 0.5          # shrinks the EOS row of the output head: EOS is rare but possible
TARGET_NAME = "tiny-random/target"
DRAFT_NAME = "tiny-random/draft"


def build_tiny_tokenizer(characters: str = ASCII_CHARACTERS, max_length: int = 1024) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: 4 special tokens, then one token per character.
    Encoding prepends <bos>; characters outside `characters` become <unk>."""
    vocab = {token: index for index, token in enumerate((*SPECIAL_TOKENS, *dict.fromkeys(characters)))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character alone
    backend.decoder = decoders.Fuse()  # join characters without separators
    backend.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>", pad_token="<pad>", model_max_length=max_length)


def build_tiny_pair(seed: int = 0, draft_noise: float = DEFAULT_DRAFT_NOISE, vocab: str = ASCII_CHARACTERS,
                    hidden_size: int = 64, num_layers: int = 3, num_heads: int = 4, max_context: int = 1024,
                    device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> ModelPair:
    """A deterministic random Llama pair for `seed`; `draft_noise=0.0` makes the draft
    an exact copy of the target. Neither the global RNG nor any global state is touched."""
    if draft_noise < 0:
        raise ValueError(f"draft_noise must be >= 0, got {draft_noise!r}")
    tokenizer = build_tiny_tokenizer(vocab, max_context)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
        max_position_embeddings=max_context, initializer_range=INIT_STD, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    target = _random_model(config, seed)
    draft = _random_model(config, seed)
    add_noise(draft, draft_noise, seed)
    target_dtype = str(dtype).removeprefix("torch.")
    return ModelPair(
        target=_ready(target, device, dtype), draft=_ready(draft, device, dtype), tokenizer=tokenizer,
        target_name=TARGET_NAME, draft_name=DRAFT_NAME, device=torch.device(device),
        target_dtype=target_dtype, draft_dtype=target_dtype, preset=TINY_RANDOM, default_drafter=MODEL_DRAFTER,
    )


def _random_model(config: LlamaConfig, seed: int) -> LlamaForCausalLM:
    with torch.random.fork_rng(devices=[]):  # seed weight init without disturbing the caller's RNG
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(HEAD_SCALE)
        model.lm_head.weight[config.eos_token_id] *= EOS_LOGIT_SCALE
    model.generation_config.eos_token_id = config.eos_token_id
    return model


def add_noise(model: torch.nn.Module, scale: float, seed: int) -> None:
    """Add N(0, (scale * std(W))^2) to every weight matrix W (norm gains, all ones, are kept), drawn
    on the CPU from `seed` (the same noise on any device) and added where the weights live."""
    if scale == 0.0:
        return
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() >= 2:
                noise = torch.randn(weight.shape, generator=generator).to(weight.device, weight.dtype)
                weight.add_(noise * (scale * weight.std()))


def _ready(model: LlamaForCausalLM, device: str | torch.device, dtype: torch.dtype) -> LlamaForCausalLM:
    model.to(device=device, dtype=dtype)
    model.eval()
    model.requires_grad_(False)
    return model
