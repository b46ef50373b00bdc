import threading

from trizk.kazoo_harness import KazooTestCase  # was: from kazoo.testing import KazooTestCase


class QueueTest(KazooTestCase):
    def test_queue_survives_expiry(self):
        queue = self.client.LockingQueue("/jobs")
        queue.put(b"job-1")
        self.expire_session(threading.Event)
        self.assertEqual(queue.get(timeout=5), b"job-1")
