from kazoo.client import KazooClient

from trizk.testing import Ensemble


def test_writes_survive_the_leader(trizk_ensemble):
    zk = KazooClient(hosts=trizk_ensemble.connect_string)  # every member
    zk.start()
    zk.create("/orders/1", b"paid", makepath=True)
    trizk_ensemble.kill(trizk_ensemble.leader())  # no clean shutdown
    trizk_ensemble.wait_for_quorum()  # the two others elect a new leader
    assert zk.retry(zk.get, "/orders/1")[0] == b"paid"  # same session, no write lost
    zk.stop()


def test_a_partitioned_leader_steps_down():
    with Ensemble(3) as ens:  # mode="process" for trizk-server children
        old = ens.leader()
        rest = [s for s in ens.members if s != old]
        ens.partition([old], rest)
        modes = ens.wait_for_quorum(members=rest)  # the majority elects among itself
        assert "leader" in modes.values()
        ens.heal()
        assert ens.wait_for_quorum()[old] == "follower"  # back, behind the new leader
