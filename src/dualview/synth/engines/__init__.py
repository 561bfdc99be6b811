"""The engine registry: ``runner.engine`` (a name) and the backend kind -> an engine.

Built in:

| name | backend kind | engine |
|---|---|---|
| ``local`` | any | `engines.local.LocalEngine`: asyncio in this process |
| ``ray`` | any | `engines.ray.RayEngine`: Ray Data ``map_batches`` (``dualview[ray]``) |
| ``ray`` | ``vllm`` | `engines.ray_vllm.RayVLLMEngine`: Ray Data LLM's vLLM processor |

A registration for a name and a backend kind wins over the name's registration for any kind.
Adding an engine is one module (a class with the `dualview.synth.engine.Engine` shape,
built as ``Engine(backend_config, runner_config)``) and one call::

    register_engine("mine", "mypackage.mine:MineEngine")   # or the class itself

The built-in engines are registered by dotted path and imported only when chosen. Two
reasons: their optional heavy dependencies (``ray``, ``vllm``) stay out of every run that
does not use them, and this registry stays below the engine modules in the import graph.
The runner imports this registry, the engines import only `dualview.synth.engine`, so no
import runs from the runner to an engine and none runs back (the cycle
``runner`` <-> ``ray_engine`` that the engines once formed).
"""

from __future__ import annotations

from typing import Any

from dualview.errors import ConfigError
from dualview.registry import Registry
from dualview.synth.backends.base import BackendConfig, ChatBackend
from dualview.synth.engine import Engine, EngineFactory, RunnerConfig

#: ``runner.engine`` name -> factory (a class or its ``module:attribute`` path); a variant
#: for one backend kind is registered as ``NAME/KIND``. Plugins: group ``dualview.engines``.
ENGINES: Registry[EngineFactory] = Registry(
    "engine",
    field="runner.engine",
    group="dualview.engines",
    entries={
        "local": "dualview.synth.engines.local:LocalEngine",
        "ray": "dualview.synth.engines.ray:RayEngine",
        "ray/vllm": "dualview.synth.engines.ray_vllm:RayVLLMEngine",
    },
)


def register_engine(
    name: str, factory: EngineFactory | str, *, backend_kind: str | None = None
) -> None:
    """Make ``runner.engine: name`` build ``factory`` (a class or a ``module:attribute``
    path); with ``backend_kind``, only for backends of that kind. Replaces an earlier
    registration of the same name and kind."""
    key = name if backend_kind is None else f"{name}/{backend_kind}"
    ENGINES.register(key, factory, replace=True)


def engine_names() -> list[str]:
    """The registered engine names, sorted."""
    return sorted({name.partition("/")[0] for name in ENGINES.names()})


def engine_factory(name: str, backend_kind: str | None = None) -> EngineFactory:
    """The factory registered for ``name`` and ``backend_kind`` (else for ``name``)."""
    variant = f"{name}/{backend_kind}"
    if backend_kind is not None and variant in ENGINES:
        return ENGINES.get(variant)
    if name not in ENGINES or "/" in name:
        known = ", ".join(engine_names())
        raise ConfigError(f"runner.engine: unknown engine {name!r}; known: {known}")
    return ENGINES.get(name)


def build_engine(backend: BackendConfig, config: RunnerConfig, **hooks: Any) -> Engine:
    """The engine that ``config.engine`` names for ``backend``'s kind."""
    return engine_factory(config.engine, backend.kind)(backend, config, **hooks)


def engine_over(chat: ChatBackend, config: RunnerConfig) -> Engine:
    """The local engine over a backend already built (a stub, a test double, a backend
    object of your own): what ``Runner(task, backend, ...)`` runs when given a backend."""
    return engine_factory("local")(BackendConfig(), config, chat=chat)
