"""Hugging Face Hub access that fails fast when the Hub cannot be reached.

Left alone, transformers retries an unreachable Hub through five backoffs
before giving up. `hub_access` asks the Hub once with a short
timeout first: reachable -> download as usual; unreachable but the model is in
the local Hub cache -> load it with `local_files_only`; otherwise one clear
ModelLoadError after that one request (times in docs/benchmark.md).
"""

from __future__ import annotations

import os

from huggingface_hub import HfApi, constants, try_to_load_from_cache
from huggingface_hub.errors import GatedRepoError, HFValidationError, HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.utils import validate_repo_id

from engine.presets import ModelLoadError

PROBE_TIMEOUT_S = 4.0
_TRUTHY = {"1", "on", "yes", "true"}


def is_hub_id(reference: str) -> bool:
    """True when `reference` is spelled like a Hub repo id ("gpt2", "org/name")."""
    try:
        validate_repo_id(reference)
    except HFValidationError:
        return False
    return reference.count("/") <= 1


def hub_access(repo_id: str) -> dict[str, bool]:
    """Keyword arguments for `from_pretrained(repo_id, ...)`, or ModelLoadError when the
    model can be neither downloaded nor found in the local Hub cache."""
    offline_reason = _offline_reason(repo_id)
    if offline_reason is None:
        return {}
    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return {"local_files_only": True}
    no_local = " and no local path of that name exists" if "/" in repo_id else ""
    raise ModelLoadError(f"could not fetch {repo_id!r} from the Hugging Face Hub ({offline_reason}){no_local}; "
                         "use a preset with embedded weights such as qwen-coder, or a local directory / .gguf file")


def _offline_reason(repo_id: str) -> str | None:
    """None when the Hub answers for `repo_id`, else why it cannot be used."""
    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUTHY:
        return "HF_HUB_OFFLINE is set"
    try:
        HfApi().model_info(repo_id, timeout=PROBE_TIMEOUT_S)
    except GatedRepoError:
        return None  # reachable; the download itself will explain the gate
    except RepositoryNotFoundError as error:
        raise ModelLoadError(f"{repo_id!r} is not a model on the Hugging Face Hub (or it is private)") from error
    except HfHubHTTPError:
        return None  # the Hub answered; a real problem will surface, explained, in the download
    except Exception:  # DNS, refused connection, timeout, proxy, TLS: every way of not reaching the Hub
        return "this machine is offline"
    return None
