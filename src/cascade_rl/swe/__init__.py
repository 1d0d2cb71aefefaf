"""The Agentless-style SWE pipeline (SPEC section 7; issue 5) and the SEARCH/REPLACE machinery
the SWE reward shares with it (SPEC section 6).

* :mod:`.edits`     parse SEARCH/REPLACE edits, apply them, render git-style unified diffs
* :mod:`.prompts`   the appendix C.2 prompts (localisation, repair, reproduction test, judge)
* :mod:`.localize`  file localisation: generation + frequency vote, BM25 / embedding retrieval,
  reciprocal-rank fusion, recall@k
* :mod:`.repair`    repair prompts within a token budget, k samples, candidate patches
* :mod:`.validate`  regression and reproduction tests in sandboxed throw-away checkouts
* :mod:`.rank`      best@k, majority@k, pass@k and their curves over k
* :mod:`.data`      SWE SFT / RL data building (``cascade swe build-data``)
* :mod:`.pipeline`  instances, checkouts, traces and predictions: the whole pipeline
* :mod:`.cli`       ``cascade swe localize | repair | evaluate | build-data``

Nothing heavy is imported here: the reward imports :mod:`.edits` on every scoring call.
"""
