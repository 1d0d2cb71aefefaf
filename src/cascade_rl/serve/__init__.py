"""Models served apart from the training processes (issue: a 72B reward model and a 72B judge
cannot sit in every training process).

* :mod:`cascade_rl.serve.server` -- ``cascade serve reward-model PATH``: a transformers reward
  model behind vLLM's Pooling API (CPU or GPU, requests batched together);
* :mod:`cascade_rl.serve.teacher` -- ``cascade serve teacher``: a distillation teacher's token
  log-probabilities behind vLLM's completions API, and its client.

The commands are :mod:`cascade_rl.cli.serve`. The servers sit above the rewards they serve
(DESIGN.md, "Layers"). The clients that rewards use live below them, with the other model
clients: the Pooling API's shapes, client and preflight in :mod:`cascade_rl.llm.pooling`, the
fail-fast guard in :mod:`cascade_rl.llm.guard`.
The SWE judge is served by any OpenAI-compatible server (:mod:`cascade_rl.llm.judge`).
"""
