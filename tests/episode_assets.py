"""A tool-calling model and workplace rows for the multi-turn engine tests (no downloads).

The model is a chain model (tests/llm/llm_helpers.py: a real Qwen3 whose next token depends
only on the current one): every assistant turn is ``<tool_call>CALL</tool_call><|im_end|>``, where
CALL is, with equal odds, the row's reference call (delete the customer 00000011) or a look-up
that changes nothing. Each episode therefore takes every turn its step budget allows, reads real
tool results in between, and is rewarded 1 when at least one turn deleted the customer: groups
have variance, so the update moves the weights, and what an episode earns is decided by the
environment over several turns. Its tokenizer is byte-level (one token per byte) plus the two
calls as single added tokens.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from cascade_rl.chat import IM_END, TOOL_CALL_CLOSE, TOOL_CALL_OPEN

sys.path.insert(0, str(Path(__file__).parent / "llm"))
from llm_helpers import SURE, build_chain_model  # noqa: E402

CUSTOMER = "00000011"
DELETE = json.dumps({"name": "customer_relationship_manager_delete_customer", "arguments": {"customer_id": CUSTOMER}})
LOOKUP = json.dumps({"name": "customer_relationship_manager_search_customers", "arguments": {"customer_name": "Acme"}})


def chain(delete_bias: float = 0.0) -> dict:
    return {
        "\n": {TOOL_CALL_OPEN: SURE},
        TOOL_CALL_OPEN: {DELETE: SURE + delete_bias, LOOKUP: SURE},
        DELETE: {TOOL_CALL_CLOSE: SURE},
        LOOKUP: {TOOL_CALL_CLOSE: SURE},
        TOOL_CALL_CLOSE: {IM_END: SURE},
    }


def build_caller(path: Path, head_dim: int = 8, delete_bias: float = 0.0) -> Path:
    """The tool-calling chain model (module docstring); ``head_dim=32`` for vLLM's CPU kernels;
    ``delete_bias``: the log-odds of the deleting call over the look-up (0: even)."""
    return build_chain_model(Path(path), chain(delete_bias), (DELETE, LOOKUP), head_dim=head_dim)


def caller_rows(count: int, seed: int = 0) -> list[dict]:
    """Workplace rows (domain ``workplace``), each with its own small database holding the
    customer 00000011 (Acme) and the reference call deleting it."""
    from cascade_rl.world import office

    rows = []
    for index in range(count):
        database = office._database(random.Random(seed * 1000 + index))
        database["customer_relationship_manager"][0].update(customer_id=CUSTOMER, customer_name="Acme")
        rows.append(
            {
                "id": f"caller-{index}",
                "prompt": [{"role": "user", "content": f"Request {index}: delete the customer Acme."}],
                "domain": "workplace",
                "ground_truth": [
                    {
                        "name": "customer_relationship_manager_delete_customer",
                        "arguments": json.dumps({"customer_id": CUSTOMER}),
                    }
                ],  # fmt: skip
                "database": database,
            }
        )
    return rows
