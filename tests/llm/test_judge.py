"""YesNoJudge: P(YES) read from next-token logits locally, from logprobs or samples on a server.
The judge model of llm_helpers.py says YES after ``<judgement>`` with probability 3/4."""

import asyncio
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from llm_helpers import JUDGE_P_YES, ProxyServer, free_port

from cascade_rl.llm import LocalGenerator, OpenAICompatGenerator, YesNoJudge
from cascade_rl.llm.judge import load_judge, yes_probability_from_logprobs
from cascade_rl.rewards.registry import PreflightError, preflight, score_batch

JUDGE_PROMPT = [
    {"role": "system", "content": "Respond only with <judgement>YES</judgement> or <judgement>NO</judgement>."},
    {"role": "user", "content": "Does the patch fix the issue?", "mode": "no_think"},
]


@pytest.fixture(scope="module")
def local_judge_lm(judge_model_path):
    return LocalGenerator(judge_model_path)


def test_local_judge_reads_p_yes_at_the_judgement_position(local_judge_lm):
    assert len(local_judge_lm.tokenizer.encode("YES", add_special_tokens=False)) == 3  # first token stands in
    judge = YesNoJudge(local_judge_lm)
    assert judge.probability_yes(JUDGE_PROMPT) == pytest.approx(JUDGE_P_YES, abs=1e-3)
    # swapping the words asks for P(NO)
    assert YesNoJudge(local_judge_lm, yes="NO", no="YES").probability_yes(JUDGE_PROMPT) == pytest.approx(
        1 - JUDGE_P_YES, abs=1e-3
    )
    assert asyncio.run(judge.aprobability_yes(JUDGE_PROMPT)) == pytest.approx(JUDGE_P_YES, abs=1e-3)


def test_local_judge_from_a_spec_and_bad_words(judge_model_path, local_judge_lm):
    judge = YesNoJudge(f"local:{judge_model_path}")
    assert judge.probability_yes(JUDGE_PROMPT) == pytest.approx(JUDGE_P_YES, abs=1e-3)
    with pytest.raises(ValueError, match="same token"):
        YesNoJudge(local_judge_lm, yes="YES", no="YEP")
    with pytest.raises(TypeError, match="YesNoJudge needs"):
        YesNoJudge(42)  # type: ignore[arg-type]


def test_server_without_logprobs_falls_back_to_counting_samples(transformers_server, judge_model_path):
    with ProxyServer(transformers_server) as proxy:
        backend = OpenAICompatGenerator(proxy.base_url, str(judge_model_path), max_concurrency=8)
        judge = YesNoJudge(backend, samples=32, max_tokens=8)
        probability = judge.probability_yes(JUDGE_PROMPT)
        # 32 draws at P(YES) = 0.75: outside [0.4, 31/32] with probability < 1e-3
        assert 0.4 <= probability <= 31 / 32 and (probability * 32).is_integer()
        assert judge.server_logprobs is False and proxy.bodies[0]["logprobs"] is True
        asked, judge.samples = len(proxy.bodies), 4
        judge.probability_yes(JUDGE_PROMPT)
        assert all("logprobs" not in body for body in proxy.bodies[asked:])  # not asked again


def _entry(token, logprob, top=()):
    return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}


def test_logprobs_of_a_vllm_response_at_their_boundary():
    ln = math.log
    content = [
        _entry("<think>", 0.0),
        _entry("maybe <judgement>", -0.1),
        _entry("NO", -0.1),
        _entry("</think>", 0.0),
        _entry("<jud", 0.0),
        _entry("gement>", 0.0),
        _entry("YES", ln(0.6), [("YES", ln(0.6)), ("NO", ln(0.2)), ("Y", ln(0.1)), ("Sure", ln(0.1))]),
        _entry("</judgement>", 0.0),
    ]
    # the position inside the thinking is skipped; YES-like tokens sum to 0.7 against 0.2 for NO
    assert yes_probability_from_logprobs(content) == pytest.approx(0.7 / 0.9)
    assert yes_probability_from_logprobs(content[:4]) is None  # never reached a judgement
    assert yes_probability_from_logprobs([_entry("<judgement>", 0.0), _entry("Hmm", 0.0)]) is None


def test_judgement_is_read_from_the_answer_only(local_judge_lm):
    judge = YesNoJudge(local_judge_lm)
    assert judge.judgement("<judgement>YES</judgement>") == "YES"
    assert judge.judgement("<think>maybe <judgement>YES</judgement></think><judgement> NO</judgement>") == "NO"
    assert judge.judgement("<think><judgement>YES</judgement>") is None  # unfinished thinking
    assert judge.judgement("I think YES") is None


# ---- the judge as a service (issue 8): judge defaults, failures scored 0 and counted, preflight


class LogprobJudgeServer(ThreadingHTTPServer):
    """A chat-completions endpoint that answers as vLLM does with ``logprobs``: the tokens
    ``<judgement>`` then the answer token, with the real local judge model's top log-probabilities
    at that position (``transformers serve`` returns no logprobs). Records each request body."""

    daemon_threads = True

    def __init__(self, model: LocalGenerator):
        super().__init__(("127.0.0.1", 0), _LogprobHandler)
        self.model, self.bodies = model, []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class _LogprobHandler(BaseHTTPRequestHandler):
    server: LogprobJudgeServer

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        model = self.server.model
        logprobs = model.next_token_logprobs(body["messages"], "<judgement>")
        top = logprobs.topk(body["top_logprobs"])
        candidates = [
            {"token": model.tokenizer.decode([int(i)]), "logprob": float(lp)} for lp, i in zip(top.values, top.indices)
        ]
        content = [
            {"token": "<judgement>", "logprob": 0.0, "top_logprobs": []},
            {**candidates[0], "top_logprobs": candidates},
        ]
        text = "<judgement>" + candidates[0]["token"]
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": {"content": content}}
        payload = json.dumps({"choices": [{**choice, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_a_served_judge_reads_p_yes_from_logprobs(local_judge_lm):
    with LogprobJudgeServer(local_judge_lm) as server:
        judge = load_judge(f"{server.base_url}#kimi")
        assert judge.probability_yes(JUDGE_PROMPT) == pytest.approx(JUDGE_P_YES, abs=1e-3)
        body = server.bodies[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["temperature"] == 0.0
    assert body["model"] == "kimi" and judge.server_logprobs is True


def test_a_served_judge_gets_judge_defaults_unless_the_spec_sets_them():
    backend = YesNoJudge("http://judge-node:8000/v1#Kimi-Dev-72B").backend
    assert (backend.timeout, backend.max_retries, backend.max_concurrency) == (120.0, 3, 16)
    spec = {"base_url": "http://judge-node:8000/v1", "model": "kimi", "timeout": 30, "samples": 4}
    judge = load_judge(spec)
    assert judge.backend.timeout == 30 and judge.backend.max_retries == 3 and judge.samples == 4
    assert load_judge(dict(spec)) is judge  # one judge (one client, one limit) per spec and process
    with pytest.raises(ValueError, match="names no model"):
        YesNoJudge("http://judge-node:8000/v1")


def test_threads_asking_for_the_same_judge_at_once_share_one(monkeypatch):
    """Reward workers are threads; one judge (one client, one fail-fast guard) per spec, or a
    failing server is asked once per judge built instead of failing fast."""
    import threading

    from cascade_rl.llm import judge as judges

    class SlowJudge(judges.YesNoJudge):
        def __init__(self, *args, **kwargs):
            time.sleep(0.2)  # a judge takes time to build (a model or a client): the race window
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(judges, "YesNoJudge", SlowJudge)
    judges._cached_judge.cache_clear()
    spec = {"base_url": "http://judge-node:8000/v1", "model": "kimi", "timeout": 7}
    start, built = threading.Barrier(4), []

    def ask():
        start.wait()
        built.append(judges.load_judge(spec))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    judges._cached_judge.cache_clear()
    assert len(built) == 4 and len({id(judge) for judge in built}) == 1


SWE_FILES = {"calc.py": "def add(a, b):\n    return a - b\n"}
SWE_GOLDEN = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"


def swe_answer(replacement):
    edit = f"```diff\n### calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n{replacement}>>>>>>> REPLACE\n```"
    return f"<think>fix add</think>\n<solution>\n{edit}\n</solution>"


@pytest.mark.parametrize("failure", [{"fail_first": 99, "fail_status": 503}, {"hang": True}])
def test_a_failing_judge_gives_the_rollout_no_verdict(failure):
    near_misses = [swe_answer(f"    return b + a  # {i}\n") for i in range(6)]
    requests = [{"response": r, "files": SWE_FILES, "golden_patch": SWE_GOLDEN} for r in near_misses]
    requests.append({"response": swe_answer("    return a + b\n"), "files": SWE_FILES, "golden_patch": SWE_GOLDEN})
    with ProxyServer(None, **failure) as proxy:
        judge = {"base_url": proxy.base_url, "model": "kimi", "timeout": 0.5, "max_retries": 1, "backoff_base": 0.01}
        start = time.monotonic()
        scores = score_batch("swe", requests, {"similarity": "semantic", "judge": judge}, workers=3)
        elapsed, seen = time.monotonic() - start, len(proxy.bodies)
    judged, identical = scores[:-1], scores[-1]
    assert all(s.masked.startswith("judge failed") for s in judged)  # left out of training, not 0
    assert judged[0].details["kind"] == "similar" and judged[0].details["patch"]
    assert identical.reward == 1.0 and identical.masked is None  # no judge needed
    assert seen <= 3 * 2 and elapsed < 15  # the first failure makes the others fail fast


def test_judge_preflight_passes_a_live_server_and_names_a_dead_one(transformers_server, judge_model_path):
    live = {"base_url": transformers_server, "model": str(judge_model_path), "samples": 2, "max_tokens": 8}
    preflight("swe", {"similarity": "semantic", "judge": live}, timeout=120)
    preflight("swe", {"similarity": "lexical", "judge": "http://127.0.0.1:9/v1#never-asked"}, timeout=1)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(PreflightError) as error:
        preflight("swe", {"similarity": "semantic", "judge": f"{dead}#kimi"}, timeout=2)
    message = str(error.value)
    assert message.startswith("reward_options.swe.judge: ") and dead in message and "\n" not in message
