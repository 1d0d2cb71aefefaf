"""A scripted pairwise judge behind a real OpenAI-compatible chat-completions server, run as its own
process (``python genrm_judge.py PORT``) for the GenRM tests.

It reads the two responses of a comparison from the ``response_1`` / ``response_2`` messages
(NVIDIA's GenRM format) or from the ``<response_1>`` / ``<response_2>`` sections of the user
message (the project's default template), and judges them by rule, so that every reward is
known in advance:

* ``score_i`` = the N of a ``quality=N`` marker in response i (3 without one);
* ``ranking``: 2 when response 1 scores higher, 5 when response 2 does; on a tie 3 (the judge
  favours the first position) unless ``tiebreak=second`` appears anywhere in what it was sent
  (a response, the principle, the prompt: then 4);
* the reply is ``<think>`` + a decoy JSON object + ``</think>`` + prose + the JSON answer.

Markers in a response change the judge's behaviour: ``GARBAGE`` (a reply without JSON),
``FENCED`` (the answer in a fenced ``json`` block followed by another object), ``FAIL`` (HTTP
500), ``HANG`` (no answer for 60 s), ``SLOW`` (answer after 0.3 s). ``GET /stats`` answers the
number of chat requests so far and the most in flight at once; ``GET /reset`` starts that count
of the most in flight again.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"requests": 0, "in_flight": 0, "max_in_flight": 0}
LOCK = threading.Lock()


def responses(messages: list[dict]) -> tuple[str, str]:
    roles = {m["role"]: m["content"] for m in messages}
    if "response_1" in roles:
        return roles["response_1"], roles["response_2"]
    text = messages[-1]["content"]
    first = re.search(r"<response_1>\n(.*?)\n</response_1>", text, re.S)
    second = re.search(r"<response_2>\n(.*?)\n</response_2>", text, re.S)
    return (first.group(1) if first else ""), (second.group(1) if second else "")


def quality(text: str) -> int:
    found = re.search(r"quality=(\d)", text)
    return int(found.group(1)) if found else 3


def reply(first: str, second: str, everything: str) -> str:
    score_1, score_2 = quality(first), quality(second)
    if score_1 != score_2:
        ranking = 2 if score_1 > score_2 else 5
    else:
        ranking = 4 if "tiebreak=second" in everything else 3
    answer = json.dumps({"score_1": score_1, "score_2": score_2, "ranking": ranking})
    decoy = '{"score_1": 1, "score_2": 1, "ranking": 6}'
    if "GARBAGE" in first + second:
        return "<think>hmm</think>Both responses are fine, I cannot decide."
    if "FENCED" in first + second:
        return f'<think>{decoy}</think>Verdict:\n```json\n{answer}\n```\nNot this one: {{"ranking": 6}}'
    return f"<think>Let me compare. {decoy}</think>Response 1 is judged against response 2.\n{answer}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        with LOCK:
            if self.path == "/reset":
                STATE["max_in_flight"] = STATE["in_flight"]
            self._send(200, dict(STATE))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "HANG" in json.dumps(body["messages"]):  # never answers; not counted in flight
            time.sleep(60)
            return
        with LOCK:
            STATE["requests"] += 1
            STATE["in_flight"] += 1
            STATE["max_in_flight"] = max(STATE["max_in_flight"], STATE["in_flight"])
        try:
            first, second = responses(body["messages"])
            both = first + second
            if "SLOW" in both:
                time.sleep(0.3)
            if "FAIL" in both:
                self._send(500, {"error": {"message": "judge crashed", "code": 500}})
                return
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": reply(first, second, json.dumps(body["messages"]))},
            }
            self._send(200, {"id": "chat-1", "object": "chat.completion", "model": body["model"], "choices": [choice]})
        finally:
            with LOCK:
                STATE["in_flight"] -= 1

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()
