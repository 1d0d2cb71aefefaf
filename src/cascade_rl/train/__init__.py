"""Training (DESIGN.md, layer ``train``): the stage runners on TRL (``sft``, ``reward_model``,
``grpo``, ``distill``), the cascade that runs a recipe's stages in order (``cascade``), the
engine-neutral policy they share (``schedule``, ``filtering``, ``curriculum``), several
processes (``distributed``) and the bridge from the reward registry to TRL's reward functions
(``reward_adapter``).

Imported modules only (no names re-exported here): ``import cascade_rl.train`` stays cheap.
"""
