"""Models served apart from the training processes (issue: a 72B reward model and a 72B judge
cannot sit in every training process).

* :mod:`cascade_rl.serve.protocol` -- the reward-model service: vLLM's Pooling API, its client
  (concurrency limit, timeouts, retries with backoff) and the preflight check;
* :mod:`cascade_rl.serve.server` -- ``cascade serve reward-model PATH``: a transformers reward
  model behind that API (CPU or GPU, requests batched together);
* :mod:`cascade_rl.serve.guard` -- fail fast while a server is down, wait for one to come up;
* :mod:`cascade_rl.serve.cli` -- the ``cascade serve`` commands.

The SWE judge is served by any OpenAI-compatible server (:mod:`cascade_rl.llm.judge`).
"""
