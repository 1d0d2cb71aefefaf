"""Toy structured-output tasks: every gold document passes the real scorer; a document with a
missing or an extra field does not."""

import json
import random

from cascade_rl.rewards.structured import score
from cascade_rl.world.structured import structured_task


def test_gold_documents_follow_the_strict_schema_and_near_misses_fail():
    rng = random.Random(0)
    kinds = set()
    for _ in range(200):
        task = structured_task(rng)
        kinds.add(task.reference["schema_type"])
        assert score(task.answer, **task.reference).reward == 1.0, task
        if task.reference["schema_type"] == "json":
            document = json.loads(task.answer)
            assert score(json.dumps({**document, "extra": 1}), **task.reference).reward == 0.0
            assert score(json.dumps(dict(list(document.items())[1:])), **task.reference).reward == 0.0
    assert kinds == {"json", "yaml"}
