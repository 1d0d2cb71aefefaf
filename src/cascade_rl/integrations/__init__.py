"""Bridges to other RL engines (SPEC section 11): the reward verifiers as a NeMo Gym resources
server (:mod:`.nemo_gym`) and as a verl reward function and dataset (:mod:`.verl`)."""
