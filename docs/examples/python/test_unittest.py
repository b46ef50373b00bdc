import unittest

from kazoo.client import KazooClient

from trizk.testing import Server


class LeaderTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()  # mode="process" for a trizk-server child
        self.server.start()
        self.addCleanup(self.server.close)
        self.server.load({"/services/db": "10.0.0.1:5432"})
        self.zk = KazooClient(hosts=self.server.connect_string)
        self.zk.start()
        self.addCleanup(self.zk.stop)

    def test_survives_a_restart(self):
        self.server.restart()
        self.assertEqual(self.zk.retry(self.zk.get, "/services/db")[0], b"10.0.0.1:5432")

    def test_expiry_is_seen(self):
        self.zk.create("/lock", ephemeral=True)
        self.server.expire_session(self.zk.client_id[0])
        self.assertIsNone(self.zk.retry(self.zk.exists, "/lock"))
