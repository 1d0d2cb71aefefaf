"""Data for the stages: loading and validation (:mod:`.loading`), hygiene (:mod:`.hygiene`:
exact dedup and n-gram decontamination, SPEC section 3)."""
