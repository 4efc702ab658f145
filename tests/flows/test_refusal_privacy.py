"""A refused input in Prefect (issue 30, item 9). Under ``out_of_bounds: reject`` one record
flips a release from published to refused, with no noise: the refusal is a fact about the
confidential data. Prefect's flow and task run states, their logs and the failure event say
only that the input was refused and at which stage, naming the failure record; the column and
the rule reach only the steward (the terminal) and ``failures/<id>/failure.json``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dprelease.cli.main import app
from dprelease.engines.inputs import InputRefused
from tests.helpers import adult_rows, assert_nothing_spent, cli_text, write_spec

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

DETAIL = ("column 'age'", "[17, 90]", "public bounds")


def _bad_spec(tmp_path):
    data = adult_rows(300)
    data.loc[11, "age"] = "150"
    return write_spec(tmp_path, data)


def _prefect_texts(flow_run_id) -> list[str]:
    """Every state message and log line Prefect holds for the flow run and its task runs."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run_id)
        texts = [s.message or "" for s in client.read_flow_run_states(flow_run_id)]
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
        texts += [t.state.message or "" for t in tasks if t.state is not None]
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), limit=200)
        texts += [log.message for log in logs]
    return texts


def test_prefect_hears_that_the_input_was_refused_and_where_not_why(tmp_path):
    from dprelease.flows.release import release

    out = tmp_path / "out"
    state = release(str(_bad_spec(tmp_path)), str(out), release_id="bad", return_state=True)
    assert state.is_failed()
    with pytest.raises(InputRefused) as refused:
        state.result()
    (record,) = (out / "failures").iterdir()
    texts = _prefect_texts(state.state_details.flow_run_id)
    assert any("refused at stage 'validate_input'" in t and str(record) in t for t in texts), texts
    leaked = [t for t in texts if any(d in t for d in DETAIL)]
    assert leaked == []
    failure = json.loads((record / "failure.json").read_text())
    assert "column 'age': values must lie within the public bounds [17, 90]" in failure["message"]
    assert failure["error"] == "InputRefused" and refused.value.record == str(record)
    assert_nothing_spent(out, "bad")


def test_the_steward_sees_why_on_the_terminal(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["release", str(_bad_spec(tmp_path)), "--out", str(out)])
    assert result.exit_code == 2, result.output
    text = cli_text(result.output)
    assert "column 'age': values must lie within the public bounds [17, 90]" in text
    assert "failure record:" in text and "nothing was published or spent" in text
