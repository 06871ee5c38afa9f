"""An injected disagreement, for tests only: with this folder on PYTHONPATH
the torch engine's server computes every coherence factor with lambda
times SKEW (1 - 1.02 lambda max(0, cos) instead of 1 - lambda max(0, cos)),
so its factors differ from native's wherever the regularizer acts, and
engine-check must fail. It patches marlow_torch.training.coherence_scale
when that module is first imported."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

SKEW = 1.02


class _Skew(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "marlow_torch.training":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader: Any = spec.loader
        load = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            training: Any = module
            honest = training.coherence_scale

            def skewed(lam: float, cos: float) -> float:
                return float(honest(lam * SKEW, cos))

            training.coherence_scale = skewed
            print("sitecustomize: coherence factors skewed (lambda x %g)" % SKEW, file=sys.stderr)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Skew())
