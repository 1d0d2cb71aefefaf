"""Training (DESIGN.md, layer ``train``): the stage runners on TRL (``sft``, ``reward_model``,
``grpo``, ``distill``), the cascade that runs a recipe's stages in order (``cascade``), the
engine-neutral policy they share (``schedule``, ``filtering``, ``curriculum``), several
processes (``distributed``) and the bridge from the reward registry to TRL's reward functions
(``reward_adapter``).

Imported modules only (no names re-exported here): ``import cascade_rl.train`` stays cheap.
"""

import warnings

# TRL warns at import when the installed vLLM is newer than the versions its own vLLM client was
# tested with; the cascade drives vLLM itself in colocate mode (train/rollouts.py), so the warning
# concerns only TRL's server mode.
warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions", category=UserWarning)
