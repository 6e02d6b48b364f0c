"""The learned prior's trainer: a small model of relative arm cost, per role.

From policy files (save_policy's, or the simulator's) it learns, for a learner state and an arm,
log(cost(arm) / cost(default arm)) and its uncertainty; the model is written as TorchScript with
its metadata and loaded by the backend (csrc/prior). Features are defined in C++ only
(``_C.prior_features``). Command line: ``python -m dynamiccl_pg prior train|eval``.
"""

from .data import Samples, load_samples
from .model import PriorEnsemble, PriorNet
from .train import save, train

__all__ = ["PriorEnsemble", "PriorNet", "Samples", "load_samples", "save", "train"]
