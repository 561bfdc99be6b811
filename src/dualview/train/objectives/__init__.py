"""Training objectives and their registry (`dualview.train.objectives.base`).

Built in: ``infonce`` (`infonce.RelationInfoNCE`), ``inf_univariate`` and
``inf_multivariate`` (`inf_embed.InfEmbedLoss`); for rerankers ``rerank_bce``,
``rerank_listwise`` and ``rerank_lambda`` (`rerank`); distillation from a teacher's cached
scores ``distill_margin_mse`` (`distill_margin_mse`) and ``distill_kl`` (`distill_kl`).
Importing this package registers them, each with its settings class (``loss:`` keys):
``infonce`` `infonce.InfoNCESettings`, the InF-Embed ones `inf_embed.InfEmbedSettings`, the
distillation ones `distill.DistillSettings`, the others `base.ObjectiveSettings`.
"""

from dualview.train.objectives import distill_kl, distill_margin_mse, inf_embed, infonce, rerank
from dualview.train.objectives.base import (
    OBJECTIVES,
    TEXT_GROUPS,
    Objective,
    ObjectiveFactory,
    ObjectiveSettings,
    build_objective,
    objective_names,
    objective_settings,
    objectives_needing,
    register_objective,
    settings_class,
)
from dualview.train.objectives.inf_embed import InfEmbedLoss
from dualview.train.objectives.infonce import RelationInfoNCE

__all__ = [
    "OBJECTIVES",
    "TEXT_GROUPS",
    "InfEmbedLoss",
    "Objective",
    "ObjectiveFactory",
    "ObjectiveSettings",
    "RelationInfoNCE",
    "build_objective",
    "distill_kl",
    "distill_margin_mse",
    "inf_embed",
    "infonce",
    "objective_names",
    "objective_settings",
    "objectives_needing",
    "register_objective",
    "rerank",
    "settings_class",
]
