"""LLM backends behind one interface (`dualview.synth.backends.base.ChatBackend`)."""

from __future__ import annotations

from dualview.synth.backends.base import BackendConfig, ChatBackend


def build_backend(config: BackendConfig) -> ChatBackend:
    """The backend that ``config.kind`` names; heavy engines are imported only when chosen."""
    if config.kind == "openai" and isinstance(config.base_url, list):
        urls = list(dict.fromkeys(config.base_url))
        if len(urls) > 1:
            from dualview.synth.backends.pool import EndpointPool

            return EndpointPool.from_config(config, urls)
        config = config.model_copy(update={"base_url": urls[0] if urls else None})
    if config.kind == "openai":
        from dualview.synth.backends.openai_http import OpenAIBackend

        return OpenAIBackend(config)
    if config.kind == "vllm":
        from dualview.synth.backends.vllm_offline import VLLMOfflineBackend

        return VLLMOfflineBackend(config)
    from dualview.synth.backends.local import LocalBackend

    return LocalBackend(config)
