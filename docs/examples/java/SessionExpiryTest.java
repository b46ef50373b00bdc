import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;

public class SessionExpiryTest {
    public static void main(String[] args) throws Exception {
        try (TrizkTestServer server = new TrizkTestServer()) {
            CountDownLatch connected = new CountDownLatch(1);
            CountDownLatch expired = new CountDownLatch(1);
            ZooKeeper zk = new ZooKeeper(server.connectString(), 10_000, event -> {
                if (event.getState() == KeeperState.SyncConnected) connected.countDown();
                if (event.getState() == KeeperState.Expired) expired.countDown();
            });
            check(connected.await(10, TimeUnit.SECONDS), "connected");
            zk.create("/worker", new byte[0], Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            check(server.expireSession(zk.getSessionId()), "expired by the server");
            check(expired.await(10, TimeUnit.SECONDS), "the client saw Expired");
            check(!server.dump().contains("\"/worker\""), "the ephemeral is gone");
            zk.close();
        }
        System.out.println("ok");
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }
}
