"""How the training processes were launched: catch a launcher that started fewer than asked.

``accelerate launch`` picks its launcher from the machine. On a machine without GPUs (or
with ``--cpu``) it uses its *simple* launcher, which starts exactly one Python process and
expects MPI (``--mpirun_hostfile``) to start the others; without MPI, ``--num_processes 2``
silently trains on one process. That launcher still exports ``MASTER_ADDR`` when more than
one process was asked for, but no ``WORLD_SIZE``, which is how the case is recognised here.
``accelerate launch --multi_gpu --num_processes N`` (torch.distributed's launcher, gloo on
CPU) and ``torchrun --nproc_per_node N`` start N processes on CPU.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from dualview.errors import ConfigError

# Variables through which MPI tells a process the size of its job.
MPI_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE")

ONE_PROCESS_MESSAGE = (
    "accelerate launch started a single process although several were asked for: without "
    "GPUs (or with --cpu) accelerate's launcher starts one process and leaves the rest to "
    "MPI (--mpirun_hostfile). Use `accelerate launch --multi_gpu --num_processes N -m "
    "dualview train ...` (gloo on CPU) or `torchrun --nproc_per_node N -m dualview train ...`"
)


def check_launch(env: Mapping[str, str] | None = None) -> None:
    """Raise `ConfigError` when accelerate's simple launcher was asked for several
    processes but started only this one (no ``WORLD_SIZE`` and no MPI job size)."""
    env = os.environ if env is None else env
    by_simple_launcher = "ACCELERATE_USE_CPU" in env and "MASTER_ADDR" in env
    sized = "WORLD_SIZE" in env or any(name in env for name in MPI_SIZE_VARS)
    if by_simple_launcher and not sized:
        raise ConfigError(ONE_PROCESS_MESSAGE)
