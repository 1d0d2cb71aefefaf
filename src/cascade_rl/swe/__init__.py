"""The Agentless-style SWE pipeline (SPEC section 7; issue 5). The SEARCH/REPLACE machinery it
shares with the SWE reward (SPEC section 6), and the repair and judge prompts, are
:mod:`cascade_rl.rewards.swe_edits` and :mod:`cascade_rl.rewards.swe_prompts`, below this package
(DESIGN.md, "Layers").

* :mod:`.prompts`   the appendix C.2 localisation and reproduction-test prompts
* :mod:`.localize`  file localisation: generation + frequency vote, BM25 / embedding retrieval,
  reciprocal-rank fusion, recall@k
* :mod:`.repair`    repair prompts within a token budget, k samples, candidate patches
* :mod:`.validate`  regression and reproduction tests in sandboxed throw-away checkouts
* :mod:`.rank`      best@k, majority@k, pass@k and their curves over k
* :mod:`.data`      SWE SFT / RL data building (``cascade swe build-data``)
* :mod:`.pipeline`  instances, checkouts, traces and predictions: the whole pipeline

Nothing heavy is imported here.
"""
