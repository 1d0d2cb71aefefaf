"""cascade_rl: Cascade RL post-training (Nemotron-Cascade) on Hugging Face models.

SFT -> reward model -> RLHF -> IF-RL -> Math RL -> Code RL -> SWE RL, each stage with its own
verifier and curriculum, driven by a YAML recipe (``cascade run``). See SPEC.md for the paper's
system and README.md for usage.
"""

__version__ = "0.1.0"
