"""bench/librdkafka_suite.py: which of librdkafka's tests it runs, and how it reads a verdict.

The suite itself needs a librdkafka checkout (`just test-librdkafka DIR`); with
LIBRDKAFKA_DIR set, one quick test of it runs here against the real broker."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from librdkafka_suite import Case, broker_tests, kafka_path, main, outcome_of, subtests_of

pytestmark = pytest.mark.bench

TEST_C = """
struct test tests[] = {
    _TEST(0000_unittests, TEST_F_LOCAL),
    _TEST(0011_produce_batch,
          0,
          /* Produces a lot of messages */
          _THRES(.ucpu = 40.0, .scpu = 8.0)),
    _TEST(0025_timers, TEST_F_LOCAL),
    _TEST(0028_long_topicnames, TEST_F_KNOWN_ISSUE, TEST_BRKVER(0, 9, 0, 0)),
#if WITH_SOCKEM
    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),
#endif
    _TEST(0045_subscribe_update, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
    _TEST(0045_resubscribe_with_regex, 0, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0058_log, TEST_F_LOCAL),
    _TEST(0107_topic_recreate,
          0,
          TEST_BRKVER_TOPIC_ADMINAPI,
          .scenario = "noautocreate"),
    _TEST(0103_transactions, 0, TEST_BRKVER(0, 11, 0, 0), .scenario = "default,ak23"),
    _TEST(8000_idle, TEST_F_MANUAL),
    /* Manual tests */
    {NULL}};
"""

SOURCE_0081 = """
static void do_test_DescribeAcls(rd_kafka_t *rk) {
}

static void do_test_apis(rd_kafka_type_t cltype) {
        do_test_unclean_destroy(cltype, 0 /*tempq*/);
        do_test_unclean_destroy(cltype, 1 /*mainq*/);
        do_test_CreateAcls(rk, mainq, 0);
        do_test_DescribeConsumerGroups("temp queue", rk, NULL, -1);
        do_test_DescribeConsumerGroups_with_authorized_ops("temp queue", rk, NULL, 1500);
}

int main_0081_admin(int argc, char **argv) {
        do_test_apis(RD_KAFKA_PRODUCER);
        return 0;
}
"""


def test_the_tests_that_need_only_a_broker_with_their_scenario() -> None:
    assert broker_tests(TEST_C) == [
        Case("0011"),
        Case("0028"),
        Case("0049"),
        Case("0045"),  # TESTS=0045 runs every 0045 test of the scenario
        Case("0045", "noautocreate"),
        Case("0107", "noautocreate"),
        Case("0103", "default"),
    ]
    assert Case("0107", "noautocreate").label == "0107 (noautocreate)"


def test_0081_is_split_by_the_functions_its_do_test_apis_calls() -> None:
    assert subtests_of(SOURCE_0081) == [
        "unclean_destroy",
        "CreateAcls",
        "DescribeConsumerGroups",
        "DescribeConsumerGroups_with_authorized_ops",
    ]


SUMMARY = """
\x1b[36m[<MAIN>   /  0.000s] ALL-TESTS: duration 0.106ms
============== {headline} ==============
TEST 20261129080730 (bare, scenario default) SUMMARY
#==================================================================#
| <MAIN>                                   |     PASSED |   0.000s |
| 0170_share_consumer_subscription         |    {verdict} |   0.000s | {reason}
#==================================================================#
"""


def test_verdicts_from_the_runner_s_summary() -> None:
    case = Case("0170")
    skipped = SUMMARY.format(
        headline="ALL TESTS PASSED",
        verdict="SKIPPED",
        reason="not applicable for broker version 4.0.0.0",
    )
    assert outcome_of(case, 0, skipped, 1.0).result == "SKIP"
    assert outcome_of(case, 0, skipped, 1.0).reason == "not applicable for broker version 4.0.0.0"
    passed = SUMMARY.format(headline="ALL TESTS PASSED", verdict=" PASSED", reason="")
    assert outcome_of(case, 0, passed, 1.0).result == "PASS"
    failure = (
        '### Test "0170_share_consumer_subscription" failed at x.c:1 ###\n'
        "Test assertion failed: expected 1, got 0\n"
    )
    failed = failure + SUMMARY.format(headline="TEST FAILURE", verdict=" FAILED", reason="")
    outcome = outcome_of(case, 134, failed, 1.0)
    assert (outcome.result, outcome.reason) == ("FAIL", "Test assertion failed: expected 1, got 0")
    assert outcome_of(case, None, "", 900.0).result == "TIMEOUT"
    sub = Case("0081", subtest="do_test_CreateAcls:")
    assert outcome_of(sub, 134, failed, 1.0).case == "0081 [do_test_CreateAcls]"


def test_kafka_path_s_kafka_topics_runs_kafka_s_tool(tmp_path: Path) -> None:
    tool = tmp_path / "kafka tool"  # a space: the path is quoted
    tool.write_text('#!/bin/sh\necho "$@"\n')
    tool.chmod(0o755)
    script = kafka_path(tool, tmp_path / "kafka") / "bin" / "kafka-topics.sh"
    args = ["--bootstrap-server", "127.0.0.1:9092", "--create", "--topic", "a b"]
    done = subprocess.run([script, *args], capture_output=True, text=True, check=True)
    assert done.stdout == "topics --bootstrap-server 127.0.0.1:9092 --create --topic a b\n"
    acls = script.parent / "kafka-acls.sh"
    done = subprocess.run([acls, "--list"], capture_output=True, text=True, check=True)
    assert done.stdout == "acls --list\n"


@pytest.mark.skipif(not os.environ.get("LIBRDKAFKA_DIR"), reason="LIBRDKAFKA_DIR is not set")
def test_one_quick_test_runs_against_the_broker(tmp_path: Path) -> None:
    checkout = os.environ["LIBRDKAFKA_DIR"]
    results = tmp_path / "results.json"
    args = ["--librdkafka", checkout, "--tests", "0035", "--json", str(results)]
    assert main([*args, "--logs", str(tmp_path / "logs")]) == 0
    assert '"result": "PASS"' in results.read_text()


FAKE_RUNNER = """#!/bin/sh
# Sleeps longer for the first test, so that runs end out of order; writes its environment.
[ "$TESTS" = 0011 ] && sleep 1
echo "TESTS=$TESTS GROUP=$TEST_CONSUMER_GROUP_PROTOCOL" >> "$ENV_LOG"
echo "| ${TESTS}_fake                     |     PASSED |   0.000s |"
"""


def test_runs_at_once_keep_the_tests_order_and_pass_the_group_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path / "librdkafka"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test.c").write_text(TEST_C)
    runner = checkout / "tests" / "test-runner"
    runner.write_text(FAKE_RUNNER)
    runner.chmod(0o755)
    monkeypatch.setenv("ENV_LOG", str(tmp_path / "env.log"))
    results = tmp_path / "results.json"
    args = ["--librdkafka", str(checkout), "--tests", "0011,0028", "--jobs", "2"]
    args += ["--bootstrap", "127.0.0.1:1", "--group-protocol", "consumer"]
    assert main([*args, "--json", str(results), "--logs", str(tmp_path / "logs")]) == 0
    outcomes = json.loads(results.read_text())
    assert [(o["case"], o["result"]) for o in outcomes] == [("0011", "PASS"), ("0028", "PASS")]
    # both ran at once: 0028, started with 0011, ended first
    ran = (tmp_path / "env.log").read_text().splitlines()
    assert ran == ["TESTS=0028 GROUP=consumer", "TESTS=0011 GROUP=consumer"]
