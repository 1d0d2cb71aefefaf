"""The workplace assistant environment of Nemotron-Cascade 2's multi-domain RL (SPEC section 11):
five databases (:mod:`.database`), their 27 tools (:mod:`.tools`), and the verdict and live
episodes (:mod:`.scorer`). NVIDIA's data and tool schemas are in ``data/`` (``data/SOURCES.md``)."""
