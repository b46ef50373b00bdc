import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;

/** A trizk server for a test: `trizk-server --port 0 --testing` and its test controls. */
public final class TrizkTestServer implements AutoCloseable {
    private final Path root = Files.createTempDirectory("trizk-");
    private final HttpClient http = HttpClient.newHttpClient();
    private final Process process;
    private final int port;
    private final String testing;

    public TrizkTestServer() throws Exception {
        process = new ProcessBuilder("trizk-server", "--port", "0", "--testing",
                        "--data-dir", root.resolve("data").toString())
                .redirectError(root.resolve("server.log").toFile())
                .start();
        BufferedReader out = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        Map<String, String> ready = new HashMap<>();
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith("trizk-server ready")) {
                for (String field : line.split(" ")) {
                    int eq = field.indexOf('=');
                    if (eq > 0) ready.put(field.substring(0, eq), field.substring(eq + 1));
                }
                break;
            }
        }
        if (!ready.containsKey("testing")) {
            close();
            throw new IllegalStateException("trizk-server did not start, see " + root);
        }
        port = Integer.parseInt(ready.get("port"));
        testing = ready.get("testing");
    }

    public String connectString() { return "127.0.0.1:" + port; }

    /** Expire a session now; returns once its closeSession is committed. */
    public boolean expireSession(long sessionId) throws Exception {
        return post("/expire?session=" + sessionId).contains("true");
    }

    public void dropConnections() throws Exception { post("/drop"); }

    /** Move the server's clock: session timeouts, TTL nodes, containers. */
    public void advance(double seconds) throws Exception { post("/advance?seconds=" + seconds); }

    /** The tree, the sessions and the watches, as JSON. */
    public String dump() throws Exception {
        return send(HttpRequest.newBuilder(URI.create(testing + "/dump")).GET());
    }

    private String post(String target) throws Exception {
        return send(HttpRequest.newBuilder(URI.create(testing + target))
                .POST(HttpRequest.BodyPublishers.noBody()));
    }

    private String send(HttpRequest.Builder request) throws Exception {
        HttpResponse<String> r = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IllegalStateException(r.body());
        return r.body();
    }

    @Override
    public void close() throws Exception {
        process.destroy(); // SIGTERM: a clean shutdown (destroyForcibly() for a crash)
        process.waitFor();
        try (Stream<Path> files = Files.walk(root)) {
            files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
