"""The C client suite's progress lines read per test (pure: :mod:`trizk.compat.ctests.results`)."""

from __future__ import annotations

from trizk.compat.ctests import results

SOURCE = """
class Zookeeper_readOnly : public CPPUNIT_NS::TestFixture {
    CPPUNIT_TEST_SUITE(Zookeeper_readOnly);
    CPPUNIT_TEST(testReadOnly);
#ifdef HAVE_OPENSSL_H
    CPPUNIT_TEST(testReadOnlyWithSSL);
#endif
    CPPUNIT_TEST_SUITE_END();
};
class TestReconfigServer : public CPPUNIT_NS::TestFixture {
    CPPUNIT_TEST_SUITE(TestReconfigServer);
    CPPUNIT_TEST(testNonIncremental);
    CPPUNIT_TEST(testRemoveFollower);
    CPPUNIT_TEST_SUITE_END();
};
"""
NAMES = results.test_names([SOURCE])


def test_names_of_every_suite() -> None:
    assert NAMES == [
        "Zookeeper_readOnly::testReadOnly",
        "Zookeeper_readOnly::testReadOnlyWithSSL",
        "TestReconfigServer::testNonIncremental",
        "TestReconfigServer::testRemoveFollower",
    ]


def test_outcomes_among_log_lines() -> None:
    # the names glued to what follows them, log lines between a name and its outcome
    out = (
        "\nRunning \n"
        "Zookeeper_readOnly::testReadOnlyLog Message Received: [ZOO_INFO@x: connected]\n"
        " : elapsed 1012 : OK\n"
        "Zookeeper_readOnly::testReadOnlyWithSSL : assertion : elapsed 2004\n"
        "TestReconfigServer::testNonIncrementalStarting\nLog Message Received: [ZOO_ERROR@y]\n"
        " : error : elapsed 5\n"
        "TestReconfigServer::testRemoveFollowerStarting\n"
    )
    assert results.parse(out, NAMES, ended_normally=False) == {
        "Zookeeper_readOnly::testReadOnly": results.PASSED,
        "Zookeeper_readOnly::testReadOnlyWithSSL": results.FAILED,
        "TestReconfigServer::testNonIncremental": results.ERROR,
        "TestReconfigServer::testRemoveFollower": results.CRASHED,
    }
    assert (
        results.parse(out, NAMES, ended_normally=True)["TestReconfigServer::testRemoveFollower"]
        == results.NO_OUTCOME
    )


def test_comparison_sides() -> None:
    zk = {"a::x": results.PASSED, "a::y": results.PASSED, "a::z": results.FAILED}
    tz = {"a::x": results.PASSED, "a::y": results.FAILED, "a::z": results.PASSED}
    cmp = results.Comparison(zk, tz)
    assert cmp.both() == ["a::x"]
    assert cmp.only_zookeeper() == ["a::y"]
    assert cmp.only_trizk() == ["a::z"]
    assert cmp.neither() == []
    assert cmp.table().splitlines()[-1] == (
        "passed on both: 1, only on ZooKeeper: 1, only on trizk: 1, on neither: 0"
    )
