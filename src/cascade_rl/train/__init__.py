"""Training (DESIGN.md, layer ``train``): the cascade that runs a recipe's stages in order
(``cascade``), the stage runners by kind behind one interface (``stages``, ``context``) -- SFT and
reward models (``sft``, ``reward_model``), GRPO and distillation through one on-policy routine
(``on_policy``, ``grpo``, ``distill``) -- the engine-neutral policy they share (``schedule``,
``filtering``, ``curriculum``, ``rewards``), the run's settled machine choices (``machine``),
several processes (``distributed``), and the one boundary with TRL (``trl_backend``).

Imported modules only (no names re-exported here, nothing installed on import): ``import
cascade_rl.train`` stays cheap and changes nothing in the process.
"""
