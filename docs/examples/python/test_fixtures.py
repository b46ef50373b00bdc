import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState


def test_config_is_read(trizk_chroot):
    zk = KazooClient(hosts=trizk_chroot.connect_string)
    zk.start()
    zk.create("/app/config", b"x=1", makepath=True)
    assert zk.get("/app/config")[0] == b"x=1"
    zk.stop()


def test_ephemeral_goes_with_the_session(trizk_fresh_server):
    zk = KazooClient(hosts=trizk_fresh_server.connect_string)
    lost = threading.Event()
    zk.add_listener(lambda state: state == KazooState.LOST and lost.set())
    zk.start()
    zk.create("/worker", ephemeral=True)
    trizk_fresh_server.advance(60)  # 60 s pass on the server: the session times out
    assert lost.wait(10)  # kazoo hears that its session expired
    zk.retry(zk.exists, "/")  # and reconnects with a new session
    assert zk.exists("/worker") is None
    zk.stop()
