"""The whole SWE pipeline: instances in, traces, predictions and report out (swe/pipeline.py)."""

import json
import statistics

import pytest
from swe_assets import git_state

from cascade_rl.swe.pipeline import InstanceError, SweInstance, load_instances, run_pipeline


def test_instances_accept_lists_or_json_strings_and_name_bad_fields(fixture_checkouts):
    _, row = fixture_checkouts["inventory"]
    encoded = dict(row, FAIL_TO_PASS=json.dumps(row["FAIL_TO_PASS"]), PASS_TO_PASS="")
    instance = SweInstance.from_dict(encoded)
    assert instance.fail_to_pass == row["FAIL_TO_PASS"] and instance.pass_to_pass == []
    assert instance.gold_files == ["inventory/cart.py", "inventory/pricing.py"]
    for bad, message in [
        ({**row, "base_commit": ""}, "'base_commit' must be a non-empty string"),
        ({**row, "FAIL_TO_PASS": "[not json"}, "not a JSON list"),
        ({**row, "PASS_TO_PASS": [1, 2]}, "list of test ids"),
        ({**row, "patch": "this is no diff"}, "field 'patch'"),
        ("just a string", "must be a JSON object"),
    ]:
        with pytest.raises(InstanceError, match=message):
            SweInstance.from_dict(bad)


def test_load_instances_reports_bad_lines(tmp_path):
    path = tmp_path / "instances.jsonl"
    path.write_text('{"instance_id": "a"}\n\n{not json\n{"instance_id": "b"}\n')
    rows, bad = load_instances(path)
    assert [r["instance_id"] for r in rows] == ["a", "b"]
    assert bad[0][0].endswith("instances.jsonl:3") and "invalid JSON" in bad[0][1]
    listing = tmp_path / "instances.json"
    listing.write_text(json.dumps([{"instance_id": "c"}]))
    assert load_instances(listing) == ([{"instance_id": "c"}], [])


def test_pipeline_traces_predictions_and_report(evaluated_run):
    report, output = evaluated_run["report"], evaluated_run["output"]
    assert sorted(name for name, _ in report.bad_instances) == [
        "bad__missing-field",
        "bad__no-checkout",
        "bad__unknown-commit",
    ]
    reasons = dict(report.bad_instances)
    assert "unknown commit" in reasons["bad__unknown-commit"]
    assert "no local checkout" in reasons["bad__no-checkout"]
    assert "'base_commit'" in reasons["bad__missing-field"]

    predictions = [json.loads(line) for line in (output / "predictions.jsonl").read_text().splitlines()]
    assert [p["instance_id"] for p in predictions] == [
        "fixtures__textkit-1",
        "fixtures__intervals-1",
        "fixtures__inventory-1",
    ]
    assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in predictions)
    textkit, intervals, inventory = predictions
    assert "+    return len(text.split())" in textkit["model_patch"]
    assert "interval.start <= merged[-1].end" in intervals["model_patch"]
    assert inventory["model_patch"] == ""

    trace = json.loads((output / "traces" / "fixtures__textkit-1.json").read_text())
    assert trace["localization"]["generation"] == ["textkit/words.py", "textkit/case.py"]
    assert trace["localization"]["recall"]["fusion"]["1"] == 1.0  # JSON keys
    statuses = [c["status"] for c in trace["candidates"]]
    assert statuses == ["ok", "ok", "ok", "ok", "unparseable", "ok", "ok", "unparseable"]
    assert trace["repair"]["counts"] == {"ok": 6, "unparseable": 2}
    assert [t["status"] for t in trace["reproduction_tests"]] == ["kept", "unparseable"]
    assert sorted(trace["regression_tests"]) == sorted(evaluated_run["rows"][0]["PASS_TO_PASS"])
    fix, near = trace["candidates"][0]["validation"], trace["candidates"][2]["validation"]
    assert fix["resolved"] and fix["pass_rate"] == 1.0
    # the near fix keeps the regression tests but not the reproduction test nor FAIL_TO_PASS
    assert near["regression_ok"] and near["reproduction_resolved"] == [False] and near["resolved"] is False
    assert trace["selection"]["best"] == 0 and trace["selection"]["resolved"] is True
    assert set(trace["timings"]) >= {"localize", "repair", "validate", "total"}
    assert trace["errors"] == []

    summary = json.loads((output / "report.json").read_text())
    assert summary["instances"] == 3 and summary["resolved"] == pytest.approx(2 / 3)
    assert summary["recall"]["retrieval"]["3"] == 1.0
    assert summary["candidates"] == {"ok": 6 + 2, "unparseable": 2 + 6 + 8}
    assert summary["curves"]["best@k"]["8"] == pytest.approx(2 / 3)
    # pass@1: textkit 4 of 8 samples resolve it, intervals 2 of 8, inventory none
    assert summary["curves"]["pass@k"]["1"] == pytest.approx((4 / 8 + 2 / 8 + 0) / 3)
    # the headline: run j submits each instance's j-th sample (textkit fixed by samples 0, 1,
    # 3, 5; intervals by 1 and 5); best@8 beside it under its own name
    headline = summary["headline"]
    per_run = [100 * n / 3 for n in (1, 2, 0, 1, 0, 2, 0, 0)]
    assert headline["per_run"] == pytest.approx(per_run) and headline["runs"] == 8 and headline["instances"] == 3
    assert headline["pass@1"] == pytest.approx(25.0) == pytest.approx(100 * summary["curves"]["pass@k"]["1"])
    assert headline["pass@1_stderr"] == pytest.approx(statistics.stdev(per_run) / 8**0.5)
    assert headline["best@8"] == pytest.approx(200 / 3)
    runs = sorted((output / "predictions").iterdir())
    assert [path.name for path in runs] == [f"run-{j}.jsonl" for j in range(1, 9)]
    second = [json.loads(line) for line in runs[1].read_text().splitlines()]
    assert [bool(p["model_patch"]) for p in second] == [True, True, False]
    assert "interval.start <= merged[-1].end" in second[1]["model_patch"]
    assert [json.loads(line)["model_patch"] for line in runs[4].read_text().splitlines()] == ["", "", ""]


def test_pipeline_never_touches_the_checkouts(evaluated_run, fixture_checkouts):
    for name, (path, _) in fixture_checkouts.items():
        assert git_state(path) == evaluated_run["states_before"][name]


def test_localize_stage_needs_no_generator(fixture_checkouts, tmp_path):
    path, row = fixture_checkouts["intervals"]
    report = run_pipeline([row], {row["repo"]: path}, tmp_path, stages="localize")
    trace = report.traces[0]
    assert trace["localization"]["retrieval"][0] == "intervals/merge.py"
    assert "candidates" not in trace and not (tmp_path / "predictions.jsonl").exists()
    with pytest.raises(ValueError, match="needs a generator"):
        run_pipeline([row], {row["repo"]: path}, tmp_path, stages="repair")
