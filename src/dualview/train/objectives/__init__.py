"""Training objectives and their registry (`dualview.train.objectives.base`).

Built in: ``infonce`` (`infonce.RelationInfoNCE`), ``inf_univariate`` and
``inf_multivariate`` (`inf_embed.InfEmbedLoss`); for rerankers ``rerank_bce``,
``rerank_listwise`` and ``rerank_lambda`` (`rerank`). Importing this package registers them.
"""

from dualview.train.objectives import inf_embed, infonce, rerank
from dualview.train.objectives.base import (
    OBJECTIVES,
    TEXT_GROUPS,
    Objective,
    build_objective,
    objective_names,
    register_objective,
)
from dualview.train.objectives.inf_embed import InfEmbedLoss
from dualview.train.objectives.infonce import RelationInfoNCE

__all__ = [
    "OBJECTIVES",
    "TEXT_GROUPS",
    "InfEmbedLoss",
    "Objective",
    "RelationInfoNCE",
    "build_objective",
    "inf_embed",
    "infonce",
    "objective_names",
    "register_objective",
    "rerank",
]
